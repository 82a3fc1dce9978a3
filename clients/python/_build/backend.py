"""Build backend: setuptools, plus a fallback for machines where setuptools cannot build a wheel alone.

setuptools older than 70.1 needs the separate ``wheel`` package to build wheels; on a machine with no package
index and no ``wheel``, ``pip install --no-index --no-build-isolation`` would fail. There, this module writes the
wheel itself (a pure-Python package: the files of ``pont/`` and its metadata, PEP 427). Everywhere else it is
setuptools' own backend, unchanged.
"""
import base64
import hashlib
import os
import re
import zipfile

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 (sdist, editable installs, everything else)

try:  # setuptools >= 70.1 has bdist_wheel; older versions take it from the wheel package
    from setuptools.command.bdist_wheel import bdist_wheel as _bdist  # noqa: F401
    _CAN_BUILD = True
except ImportError:
    try:
        import wheel  # noqa: F401
        _CAN_BUILD = True
    except ImportError:
        _CAN_BUILD = False

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "pont"
# The version is pyproject.toml's (tomllib is not in Python 3.10: a regex reads the one line).
VERSION = re.search(r'^version = "([^"]+)"', open(os.path.join(_ROOT, "pyproject.toml"), encoding="utf-8").read(), re.M).group(1)
NAME = "pont_client"


def _metadata():
    readme = open(os.path.join(_ROOT, "README.md"), encoding="utf-8").read()
    return ("Metadata-Version: 2.1\nName: pont-client\nVersion: %s\nSummary: Pont's official Python client\n"
            "Requires-Python: >=3.10\nLicense: MIT\nDescription-Content-Type: text/markdown\n\n%s" % (VERSION, readme))


def get_requires_for_build_wheel(config_settings=None):
    return _setuptools.get_requires_for_build_wheel(config_settings) if _CAN_BUILD else []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    if _CAN_BUILD:
        return _setuptools.prepare_metadata_for_build_wheel(metadata_directory, config_settings)
    dist_info = "%s-%s.dist-info" % (NAME, VERSION)
    os.makedirs(os.path.join(metadata_directory, dist_info), exist_ok=True)
    with open(os.path.join(metadata_directory, dist_info, "METADATA"), "w", encoding="utf-8") as f:
        f.write(_metadata())
    return dist_info


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    if _CAN_BUILD:
        return _setuptools.build_wheel(wheel_directory, config_settings, metadata_directory)
    name = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    dist_info = "%s-%s.dist-info" % (NAME, VERSION)
    records = []

    def add(zf, arcname, data):
        zf.writestr(arcname, data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        records.append("%s,sha256=%s,%d" % (arcname, digest, len(data)))

    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as zf:
        for file in sorted(os.listdir(os.path.join(_ROOT, PACKAGE))):
            if file.endswith(".py") or file == "py.typed":
                with open(os.path.join(_ROOT, PACKAGE, file), "rb") as f:
                    add(zf, "%s/%s" % (PACKAGE, file), f.read())
        add(zf, dist_info + "/METADATA", _metadata().encode("utf-8"))
        add(zf, dist_info + "/WHEEL", b"Wheel-Version: 1.0\nGenerator: pont-backend\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        records.append(dist_info + "/RECORD,,")
        zf.writestr(dist_info + "/RECORD", "\n".join(records) + "\n")
    return name
