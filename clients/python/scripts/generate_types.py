"""Generates pont/types.py, TypedDicts of the shapes the client sends and receives, from the OpenAPI document the
server publishes (components.schemas): the types are the server's, never written twice.

    python3 scripts/generate_types.py openapi.json        # or a URL: http://127.0.0.1:8080/api/openapi.json

The live test compares pont/types.py with what this makes from the running server's document.
"""
import json
import keyword
import re
import sys
import urllib.request
from pathlib import Path
from typing import Any, Dict, List

OUT = Path(__file__).resolve().parents[1] / "pont" / "types.py"
HEADER = '''"""TypedDicts of the interface's shapes, generated from the OpenAPI document by scripts/generate_types.py: do not edit.

Answers are ``ApiDict``s (dicts) of these shapes; FHIR resources are plain dicts (``Dict[str, Any]``).
"""
from typing import Any, Dict, List, Literal, Optional, TypedDict, Union


'''


def _name(ref: str) -> str:
    return ref.rsplit("/", 1)[-1]


def type_of(s: Any) -> str:
    if s is True or s is None or not isinstance(s, dict):
        return "Any"
    if "$ref" in s:
        return repr(_name(s["$ref"]))
    if "const" in s:
        return f"Literal[{s['const']!r}]"
    if "enum" in s:
        return "Literal[" + ", ".join(repr(v) for v in s["enum"]) + "]"
    if "anyOf" in s or "oneOf" in s:
        return _union([type_of(x) for x in s.get("anyOf") or s.get("oneOf")])
    types = s.get("type") if isinstance(s.get("type"), list) else [s.get("type")]
    out: List[str] = []
    for t in types:
        if t == "string":
            out.append("str")
        elif t == "integer":
            out.append("int")
        elif t == "number":
            out.append("float")
        elif t == "boolean":
            out.append("bool")
        elif t == "null":
            out.append("None")
        elif t == "array":
            out.append(f"List[{type_of(s.get('items'))}]")
        elif t == "object" or (t is None and "properties" in s):
            out.append("Dict[str, Any]")
        else:
            out.append("Any")
    return _union(out)


def _union(parts: List[str]) -> str:
    parts = list(dict.fromkeys(parts))
    if "Any" in parts:
        return "Any"
    others = [p for p in parts if p != "None"]
    if len(others) < len(parts):
        return "None" if not others else f"Optional[{_union(others)}]"
    return parts[0] if len(parts) == 1 else f"Union[{', '.join(parts)}]"


def render(schemas: Dict[str, Any]) -> str:
    lines = [HEADER]
    for name in sorted(schemas):
        s = schemas[name]
        props = s.get("properties")
        if s.get("type") != "object" or not isinstance(props, dict):
            lines.append(f"{name} = {type_of(s)}\n\n")
            continue
        required = set(s.get("required") or [])
        fields = {k: type_of(v) for k, v in props.items()}
        doc = (s.get("description") or "").replace('"""', "'")
        identifiers = all(k.isidentifier() and not keyword.iskeyword(k) for k in fields)
        req = {k: v for k, v in fields.items() if k in required}
        opt = {k: v for k, v in fields.items() if k not in required}
        if not identifiers:  # keys that are not Python names: the functional form, every key optional
            body = ", ".join(f"{k!r}: {v}" for k, v in fields.items())
            lines.append(f"{name} = TypedDict({name!r}, {{{body}}}, total=False)\n\n")
            continue
        base = "TypedDict"
        if req and opt:
            lines.append(f"class _{name}Required(TypedDict):\n" + "".join(f"    {k}: {v}\n" for k, v in req.items()) + "\n\n")
            base = f"_{name}Required"
        lines.append(f"class {name}({base}{', total=False' if opt else ''}):\n")
        if doc:
            lines.append(f'    """{doc}"""\n')
        for k, v in (opt if req and opt else fields).items():
            lines.append(f"    {k}: {v}\n")
        if not fields and not doc:
            lines.append("    pass\n")
        lines.append("\n\n")
    text = "".join(lines).rstrip() + "\n"
    return re.sub(r"\n{3,}(?=\S)", "\n\n\n", text)


def main() -> None:
    source = sys.argv[1]
    raw = urllib.request.urlopen(source).read() if re.match(r"https?://", source) else Path(source).read_bytes()
    OUT.write_text(render(json.loads(raw)["components"]["schemas"]), encoding="utf-8")


if __name__ == "__main__":
    main()
