import { Parser, Tokenizer, defaultTreeAdapter, html, type DefaultTreeAdapterMap, type DefaultTreeAdapterTypes } from 'parse5';

/**
 * FHIR R4 narratives (txt-1, txt-2): one `<div xmlns="http://www.w3.org/1999/xhtml">` of the basic XHTML the
 * Narrative page allows, with some text. Checked as an allow-list over the tree an HTML parser builds (the one
 * browsers build when an app shows the narrative), so that entities, whitespace in schemes, case and unclosed tags
 * change nothing: what is outside the lists below is refused, not sanitised.
 */

const XHTML = 'http://www.w3.org/1999/xhtml';

/** HTML 4 chapters 7-11 and 15 as FHIR's validator reads them (no forms, frames, objects, scripts, styles, u/s/font). */
const ELEMENTS = new Set(
  'a abbr acronym address b bdo big blockquote br caption cite code col colgroup dd dfn div dl dt em h1 h2 h3 h4 h5 h6 hr i img kbd li ol p pre q samp small span strong sub sup table tbody td tfoot th thead tr tt ul var'.split(' '),
);

/** Inert attributes, on any allowed element; href, src and cite are URLs and checked as such, style as CSS. */
const ATTRIBUTES = new Set(
  [
    'id class style lang xml:lang xml:space dir title xmlns',
    'href name src alt cite width height border start type value',
    'span colspan rowspan align valign char charoff abbr axis headers scope cellpadding cellspacing summary frame rules',
  ]
    .join(' ')
    .split(' '),
);
const URL_ATTRIBUTES = new Set(['href', 'src', 'cite']);

/** A URL's scheme, if it has one: what comes before a colon that precedes any `/`, `?` or `#`. */
const SCHEME = /^([^/?#]*):/;
const SCHEMES = new Set(['http', 'https', 'mailto']);
/** An img may also be a data: raster image (never SVG, which can script). */
const IMAGE_DATA = /^data:image\/(png|gif|jpeg|webp)[;,]/i;

/** CSS that loads or runs something: external resources, IE's expression() and behaviours, Mozilla's XBL, script URLs. */
const UNSAFE_CSS = /url\(|image-set\(|expression\(|behavior|-moz-binding|javascript:|vbscript:|@import/;

/** XML constructs an HTML parser reads differently (as a comment up to the first `>`): `<?pi?>`, `<![CDATA[`, `<!DOCTYPE`. */
const XML_ONLY = /<(\?|!(?!--))/;

const refused = (what: string) => `A narrative may hold only basic HTML (txt-1): ${what}`;

/** What is wrong with a narrative's `div`, or undefined when it is a safe FHIR narrative. */
export function narrativeProblem(div: string): string | undefined {
  // XHTML comments are harmless and allowed; in well-formed XHTML every other `<?` or `<!` is one of these.
  if (XML_ONLY.test(div)) return refused('no processing instructions, CDATA sections or DOCTYPE');
  let fragment: DefaultTreeAdapterTypes.DocumentFragment;
  try {
    fragment = parse(div);
  } catch (err) {
    if (err instanceof Refusal) return err.message;
    throw err;
  }
  const top = fragment.childNodes.filter((n) => !(n.nodeName === '#text' && !(n as DefaultTreeAdapterTypes.TextNode).value.trim()));
  const root = top[0];
  if (top.length !== 1 || root.nodeName !== 'div' || !('attrs' in root) || !root.attrs.some((a) => a.name === 'xmlns' && a.value === XHTML))
    return 'A narrative is one XHTML <div xmlns="http://www.w3.org/1999/xhtml"> (txt-1)';
  let content = false;
  // Iterative, so that deep nesting cannot exhaust the stack.
  const stack: DefaultTreeAdapterTypes.ChildNode[] = [root];
  while (stack.length) {
    const node = stack.pop()!;
    if (node.nodeName === '#text') content ||= /\S/.test((node as DefaultTreeAdapterTypes.TextNode).value);
    if (!('tagName' in node)) continue; // text and comments
    const tag = node.tagName;
    if (node.namespaceURI !== html.NS.HTML || !ELEMENTS.has(tag)) return refused(`no <${tag}> element`);
    if (tag === 'img') content = true;
    for (const { name, value } of node.attrs) {
      if (!ATTRIBUTES.has(name)) return refused(`no ${name} attribute (on <${tag}>)`);
      if (name === 'xmlns' && value !== XHTML) return refused(`<${tag} xmlns> may only be ${XHTML}`);
      if (URL_ATTRIBUTES.has(name) && !safeUrl(value, tag === 'img' && name === 'src'))
        return refused(`<${tag} ${name}> must be relative or http:, https: or mailto:${tag === 'img' ? ' (or a PNG, GIF, JPEG or WebP data:image)' : ''}`);
      if (name === 'style' && UNSAFE_CSS.test(decodeCss(value)))
        return refused(`<${tag} style> may not hold url(), image-set(), expression(), behavior, -moz-binding, @import or script URLs`);
    }
    for (let i = node.childNodes.length - 1; i >= 0; i--) stack.push(node.childNodes[i]); // in document order
  }
  return content ? undefined : 'A narrative must have some text (txt-2)';
}

/** Deeper than any real narrative (HL7's examples: 7), shallow enough that the parser's scope checks stay cheap. */
const MAX_DEPTH = 64;

/** A narrative refused while it is parsed. */
class Refusal extends Error {}

/**
 * parse5's tokenizer, refusing a tag with more attributes than the allow-list holds: its check for duplicate
 * attributes is quadratic (100,000 attributes in one tag take minutes).
 */
class BoundedTokenizer extends Tokenizer {
  protected override _leaveAttrName(): void {
    if ((this.currentToken as { attrs: unknown[] }).attrs.length >= ATTRIBUTES.size) throw new Refusal(refused('an element with more attributes than allowed'));
    super._leaveAttrName();
  }
}

/**
 * The tree a browser builds (parse5's fragment parsing, as for innerHTML), within bounds that keep its cost linear:
 * at most MAX_DEPTH levels (the parser's scope checks walk its stack of open elements) and about one element per
 * tag in the text (misnested formatting elements are recreated again and again), and no <html> or <body> tags
 * (whose attributes are merged into the root, again and again).
 */
function parse(div: string): DefaultTreeAdapterTypes.DocumentFragment {
  let elements = 16; // the parser's own root elements, and implied ones (tbody)
  for (let i = div.indexOf('<'); i >= 0; i = div.indexOf('<', i + 1)) elements++;
  const deep = (parent: DefaultTreeAdapterTypes.ParentNode) => {
    let depth = 0;
    for (let n: DefaultTreeAdapterTypes.ParentNode | null = parent; n && 'parentNode' in n; n = n.parentNode)
      if (++depth > MAX_DEPTH) throw new Refusal(refused(`no nesting deeper than ${MAX_DEPTH} elements`));
  };
  const treeAdapter: typeof defaultTreeAdapter = {
    ...defaultTreeAdapter,
    createElement(tagName, namespaceURI, attrs) {
      if (--elements < 0) throw new Refusal(refused('misnested elements, recreated more often than the narrative names them'));
      return defaultTreeAdapter.createElement(tagName, namespaceURI, attrs);
    },
    appendChild(parent, child) {
      deep(parent);
      defaultTreeAdapter.appendChild(parent, child);
    },
    insertBefore(parent, child, reference) {
      deep(parent);
      defaultTreeAdapter.insertBefore(parent, child, reference);
    },
    adoptAttributes() {
      throw new Refusal(refused('no <html> or <body> element'));
    },
  };
  // parseFragment(div) with our tokenizer: the parser is parse5's own (the fragment context is a <template>).
  const parser = Parser.getFragmentParser<DefaultTreeAdapterMap>(null, { treeAdapter });
  parser.tokenizer = new BoundedTokenizer(parser.options, parser);
  parser.tokenizer.write(div, true);
  return parser.getFragment();
}

/**
 * A URL as the parser decoded it (entities), without the ASCII whitespace and control characters browsers drop
 * or that would hide a scheme: relative (no scheme), or http:, https:, mailto:; an image may be raster data.
 */
function safeUrl(value: string, image: boolean): boolean {
  const url = value.replace(/[\u0000-\u0020\u007f]/g, '');
  const scheme = SCHEME.exec(url)?.[1].toLowerCase();
  return scheme === undefined || SCHEMES.has(scheme) || (image && IMAGE_DATA.test(url));
}

/** CSS as its tokenizer reads it, crudely: no comments, escapes decoded, no whitespace, lower case. */
function decodeCss(css: string): string {
  return css
    .replace(/\/\*[\s\S]*?(\*\/|$)/g, '')
    .replace(/\\([0-9a-f]{1,6})[ \t\r\n\f]?/gi, (_, hex: string) => String.fromCodePoint(Math.min(parseInt(hex, 16), 0x10ffff)))
    .replace(/\\/g, '')
    .replace(/\s+/g, '')
    .toLowerCase();
}
