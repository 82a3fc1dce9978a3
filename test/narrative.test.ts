import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { x as extract } from 'tar';
import { narrativeProblem } from '../src/fhir/narrative';
import { startFhirApi, type FhirTestApi } from './fhir-helpers';

/**
 * FHIR narratives (issue 20): an allow-list over the HTML parser's tree, so that what a browser would run is
 * refused however it is spelled, and the narratives of real data (HL7's examples, Synthea) still pass.
 */
const div = (inner: string) => `<div xmlns="http://www.w3.org/1999/xhtml">${inner}</div>`;
const PNG = 'data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==';
const JS = 'javascript:alert(1)';

describe('refused: active content, however spelled', () => {
  const cases: Array<[string, string, RegExp]> = [
    // Event handlers, whatever the spelling of the attribute.
    ['a slash before an event handler', div('<a/onclick=alert(1)>x</a>'), /onclick/],
    ['an onerror on an img', div('<img src=x onerror=alert(1)>'), /onerror/],
    ['an uppercase event handler', div('<a href="#" ONCLICK="alert(1)">x</a>'), /onclick/],
    ['an onmouseover on a div', div('<div onmouseover="alert(1)">x</div>'), /onmouseover/],
    ['a root div with an event handler', '<div xmlns="http://www.w3.org/1999/xhtml" onclick="alert(1)">x</div>', /onclick/],
    // Script URLs: entity-encoded, split by whitespace or controls, in any case, unquoted.
    ['a hex entity in the scheme', div('<a href="&#x6A;avascript:alert(1)">x</a>'), /<a href>/],
    ['a tab entity in the scheme', div('<a href="java&#x09;script:alert(1)">x</a>'), /<a href>/],
    ['a literal tab in the scheme', div('<a href="java\tscript:alert(1)">x</a>'), /<a href>/],
    ['a literal newline in the scheme', div('<a href="java\nscript:alert(1)">x</a>'), /<a href>/],
    ['a newline entity in the scheme', div('<a href="jav&#x0A;ascript:alert(1)">x</a>'), /<a href>/],
    ['a named tab entity in the scheme', div('<a href="java&Tab;script:alert(1)">x</a>'), /<a href>/],
    ['zero-padded decimal entities without semicolons', div('<a href="&#0000106&#0000097&#0000118&#0000097&#0000115&#0000099&#0000114&#0000105&#0000112&#0000116&#0000058alert(1)">x</a>'), /<a href>/],
    ['decimal entities with semicolons', div('<a href="&#106;&#97;&#118;&#97;&#115;&#99;&#114;&#105;&#112;&#116;&#58;alert(1)">x</a>'), /<a href>/],
    ['a colon entity without a semicolon', div('<a href="javascript&#58alert(1)">x</a>'), /<a href>/],
    ['a named colon entity', div('<a href="javascript&colon;alert(1)">x</a>'), /<a href>/],
    ['a mixed-case scheme', div('<a href="JaVaScRiPt:alert(1)">x</a>'), /<a href>/],
    ['a leading space', div(`<a href=" ${JS}">x</a>`), /<a href>/],
    ['a leading control character', div(`<a href="\u0001${JS}">x</a>`), /<a href>/],
    ['an unquoted href', div(`<a href=${JS}>x</a>`), /<a href>/],
    ['a single-quoted href', div(`<a href='${JS}'>x</a>`), /<a href>/],
    ['vbscript', div('<a href="vbscript:msgbox(1)">x</a>'), /<a href>/],
    ['a data:text/html link', div('<a href="data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==">x</a>'), /<a href>/],
    ['an uppercase img with a script src', div(`<IMG SRC="${JS}">`), /<img src>/],
    ['a data:text/html img', div('<img src="data:text/html,&lt;script&gt;alert(1)&lt;/script&gt;"/>'), /<img src>/],
    ['an SVG data:image img', div('<img src="data:image/svg+xml;base64,PHN2ZyBvbmxvYWQ9YWxlcnQoMSk+"/>'), /<img src>/],
    ['a script URL in a blockquote cite', div(`<blockquote cite="${JS}">x</blockquote>`), /<blockquote cite>/],
    ['an xlink:href', div(`<a xlink:href="${JS}">x</a>`), /xlink:href/],
    ['an img srcset', div(`<img src="a.png" srcset="${JS}"/>`), /srcset/],
    // Elements outside the subset, in any case, nested or unclosed.
    ['a script', div('<script>alert(1)</script>'), /<script>/],
    ['an uppercase script', div('<SCRIPT>alert(1)</SCRIPT>'), /<script>/],
    ['a script split by a nested tag', div('<scr<script>ipt>alert(1)</script>'), /<scr<script>/],
    ['a script in an unclosed paragraph', div('<p>x<b>y<script>alert(1)'), /<script>/],
    ['an svg with onload', div('<svg onload=alert(1)>'), /<svg>/],
    ['a script in an svg', div('<svg><script>alert(1)</script></svg>'), /<svg>/],
    ['math mutation XSS', div('<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>'), /<math>/],
    ['a style element', div('<style>body{background:url(https://evil.example/x)}</style>x'), /<style>/],
    ['an iframe with srcdoc', div('<iframe srcdoc="&lt;script&gt;alert(1)&lt;/script&gt;"></iframe>'), /<iframe>/],
    ['a srcdoc attribute', div('<p srcdoc="x">x</p>'), /srcdoc/],
    ['an object', div('<object data="https://evil.example/x.swf">x</object>'), /<object>/],
    ['an embed', div('<embed src="https://evil.example/x.swf">'), /<embed>/],
    ['a form with a formaction', div(`<form><button formaction="${JS}">x</button></form>`), /<form>/],
    ['a formaction attribute', div(`<p formaction="${JS}">x</p>`), /formaction/],
    ['an autofocus input', div('<input onfocus=alert(1) autofocus>'), /<input>/],
    ['a meta refresh', div(`<meta http-equiv="refresh" content="0;url=${JS}">x`), /<meta>/],
    ['a base', div('<base href="https://evil.example/">x'), /<base>/],
    ['a stylesheet link', div('<link rel="stylesheet" href="https://evil.example/x.css">x'), /<link>/],
    ['a template', div('<template><script>alert(1)</script></template>x'), /<template>/],
    ['a noscript mutation', div('<noscript><p title="</noscript><img src=x onerror=alert(1)>">'), /<noscript>/],
    ['a details ontoggle', div('<details open ontoggle=alert(1)>x</details>'), /<details>/],
    ['a video', div('<video><source onerror="alert(1)"></video>x'), /<video>/],
    ['an element after the root div', `${div('x')}<script>alert(1)</script>`, /one XHTML <div/],
    ['markup closing the root div early', div('x</div><img src=x onerror=alert(1)><div>'), /one XHTML <div/],
    // Style that loads or runs something.
    ['a script URL in style', div(`<p style="background:url(${JS})">x</p>`), /<p style>/],
    ['a CSS hex escape in url(', div('<p style="background:u\\72 l(https://evil.example/x)">x</p>'), /<p style>/],
    ['a CSS backslash in url(', div('<p style="background:ur\\l(https://evil.example/x)">x</p>'), /<p style>/],
    ['an expression()', div('<p style="width:expression(alert(1))">x</p>'), /<p style>/],
    ['an expression() split by a comment', div('<p style="width:expr/**/ession(alert(1))">x</p>'), /<p style>/],
    ['an @import', div('<p style="@import \'https://evil.example/x.css\'">x</p>'), /<p style>/],
    ['a -moz-binding', div('<p style="-moz-binding:url(https://evil.example/x.xml#x)">x</p>'), /<p style>/],
    // What XML and HTML parsers read differently, and a root that is not the XHTML div.
    ['a processing instruction', div('<?xml-stylesheet href="https://evil.example/x.xsl"?>x'), /processing instruction/],
    ['a CDATA section', div('<![CDATA[<script>alert(1)</script>]]>x'), /processing instruction/],
    ['another namespace on an element', div('<span xmlns="http://www.w3.org/2000/svg">x</span>'), /<span xmlns>/],
    ['a root div without the XHTML namespace', '<div><p>x</p></div>', /one XHTML <div/],
    ['a root that is not a div', '<p xmlns="http://www.w3.org/1999/xhtml">x</p>', /one XHTML <div/],
    ['text outside the root div', `x${div('y')}`, /one XHTML <div/],
    ['an empty narrative', div(' <p> </p> '), /txt-2/],
  ];

  it.each(cases)('%s', (_name, narrative, message) => {
    const problem = narrativeProblem(narrative);
    expect(problem).toMatch(message);
    expect(problem).toMatch(/\(txt-[12]\)/);
  });
});

describe('refused at a cost linear in the narrative, however it is built', () => {
  // Each of these took parse5 from seconds to minutes before the bounds (quadratic in one dimension of the input).
  const many = (n: number, f: (i: number) => string) => Array.from({ length: n }, (_, i) => f(i)).join('');
  const cases: Array<[string, string, RegExp]> = [
    ['100,000 attributes on one tag', div(`<p${many(100_000, (i) => ` a${i.toString(36)}`)}>x</p>`), /more attributes than allowed/],
    ['100,000 attributes on an end tag', div(`<p>x</p${many(100_000, (i) => ` a${i.toString(36)}`)}>`), /more attributes than allowed/],
    ['200,000 nested divs', div(`${'<div>'.repeat(200_000)}x`), /deeper than 64/],
    ['60,000 nested tables', div(`${'<table><tr><td>'.repeat(60_000)}x`), /deeper than 64/],
    ['misnested formatting elements recreated 100,000 times', div(`<p>${many(60, (i) => `<b id="b${i}">`)}</p>${'<p>x</p>'.repeat(100_000)}`), /misnested/],
    ['100,000 <html> tags whose attributes would be merged', div(many(100_000, (i) => `<html a${i}>`)), /<html>/],
  ];

  it.each(cases)('%s', (_name, narrative, message) => {
    const start = performance.now();
    expect(narrativeProblem(narrative)).toMatch(message);
    expect(performance.now() - start).toBeLessThan(3_000);
  });
});

describe('accepted: the XHTML subset of real narratives', () => {
  const cases: Array<[string, string]> = [
    ['a Synthea patient narrative', '<div xmlns="http://www.w3.org/1999/xhtml">Generated by <a href="https://github.com/synthetichealth/synthea">Synthea</a>.Version identifier: v2.4.0-100-g26a4b936\n .   Person seed: 8766734163625651911  Population seed: 1559319163074</div>'],
    ['a Synthea-style condition', div('Hypertension')],
    ['whitespace around the root', `\n  ${div('<p>x</p>')}\n`],
    ['a table', div('<table border="1" cellpadding="2" cellspacing="0" summary="codes"><caption>Codes</caption><colgroup><col span="2" width="50%"/></colgroup><thead><tr><th scope="col" colspan="2">Code</th></tr></thead><tbody><tr><td rowspan="1" align="left" valign="top">1</td><td headers="h">a</td></tr></tbody><tfoot><tr><td abbr="t">t</td></tr></tfoot></table>')],
    ['lists', div('<ul type="disc"><li>a</li></ul><ol start="3" type="1"><li value="3">b</li></ol><dl><dt>term</dt><dd>definition</dd></dl>')],
    ['links: https, http, mailto, relative, fragment', div('<a href="https://hl7.org/fhir/R4/narrative.html#xhtml">spec</a> <a href="http://example.org/a:b?c=d">x</a> <a href="mailto:someone@example.org">mail</a> <a href="Patient/123">patient</a> <a href="#section-2" name="top">top</a> <a href="./a/b:c">rel</a> <a href="//example.org/x">proto-relative</a>')],
    ['an inline PNG image only', div(`<img src="${PNG}" alt="dot" width="1" height="1" border="0"/>`)],
    ['images: relative, https, GIF, JPEG and WebP data', div('<img src="logo.png" alt="logo"/><img src="https://example.org/x.jpg" alt="x"/><img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" alt="g"/><img src="DATA:image/jpeg;base64,/9j/4AAQ" alt="j"/><img src="data:image/webp;base64,UklGRg==" alt="w"/>')],
    ['headings and phrase elements', div('<h1>1</h1><h2>2</h2><h3>3</h3><h4>4</h4><h5>5</h5><h6>6</h6><p><b>b</b> <i>i</i> <em>em</em> <strong>s</strong> <code>c</code> <samp>s</samp> <var>v</var> <tt>t</tt> <big>b</big> <small>s</small> <sub>1</sub><sup>2</sup> <abbr title="abbr">a</abbr> <acronym title="a">a</acronym> <dfn>d</dfn> <cite>c</cite> <q cite="https://example.org">q</q></p><pre>  pre\n</pre><blockquote cite="https://example.org/quote">quote</blockquote><hr/><br/>')],
    ['styles, classes, ids, languages', div('<p id="p1" class="note" style="color: red; font-weight: bold; border: 1px solid #000" lang="en" xml:lang="en" dir="ltr" title="t">x</p><span style="background-color:#eee">y</span>')],
    ['a comment', div('<!-- generated by the EHR -->text')],
    ['escaped markup as text', div('&lt;script&gt;alert(1)&lt;/script&gt; is text, as is javascript:alert(1)')],
    ['an HL7-style generated narrative', div('<p><b>Generated Narrative with Details</b></p><p><b>id</b>: example</p><p><b>clinicalStatus</b>: Active <span>(Details : {http://terminology.hl7.org/CodeSystem/condition-clinical code \'active\' = \'Active)</span></p>')],
    ['a double-encoded scheme: browsers decode once, so this is a relative URL', div('<a href="&#x26;#x6A;avascript:alert(1)">x</a>')],
    ['an inner div with the XHTML namespace', div('<div xmlns="http://www.w3.org/1999/xhtml"><p>x</p></div>')],
  ];

  it.each(cases)('%s', (_name, narrative) => {
    expect(narrativeProblem(narrative)).toBeUndefined();
  });

  it('every narrative of the HL7 R4 examples and the Synthea samples', () => {
    const repo = fileURLToPath(new URL('..', import.meta.url));
    const narratives: string[] = [];
    const collect = (value: unknown): void => {
      if (Array.isArray(value)) return value.forEach(collect);
      if (!value || typeof value !== 'object') return;
      for (const [k, v] of Object.entries(value)) (k === 'div' && typeof v === 'string' ? narratives.push(v) : collect(v));
    };
    for (const sample of ['r4-spec-examples.tar.gz', 'synthea-r4-50-patients.tar.gz']) {
      const dir = mkdtempSync(join(tmpdir(), 'pont-narratives-'));
      try {
        extract({ file: join(repo, 'samples', sample), cwd: dir, sync: true });
        for (const f of readdirSync(dir).filter((f) => f.endsWith('.json')))
          try {
            collect(JSON.parse(readFileSync(join(dir, f), 'utf8')));
          } catch {
            /* not JSON: test/fhir-import.test.ts covers it */
          }
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    }
    expect(narratives.length).toBeGreaterThan(300);
    expect(narratives.map((n) => [narrativeProblem(n), n.slice(0, 200)]).filter(([p]) => p)).toEqual([]);
  });
});

describe('POST /api/fhir/R4/Condition', () => {
  let api: FhirTestApi;
  let patientId: string;
  beforeAll(async () => {
    api = await startFhirApi();
    patientId = (await api.create({ resourceType: 'Patient', name: [{ family: 'Narrative' }] })).id;
  });
  afterAll(async () => {
    await api?.close();
  });

  const condition = (extra: Record<string, unknown>) => ({ resourceType: 'Condition', subject: { reference: `Patient/${patientId}` }, code: { text: 'Hypertension' }, ...extra });
  const count = async () => (await api.call('/Condition?_summary=count')).body.total as number;

  it('refuses an event handler with a 400 OperationOutcome naming the element and the attribute; nothing is stored', async () => {
    const before = await count();
    const res = await api.call('/Condition', { method: 'POST', json: condition({ text: { status: 'generated', div: div('<a/onclick=alert(1)>x</a>') } }) });
    expect(res.status).toBe(400);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue[0].expression).toEqual(['Condition.text.div']);
    expect(res.body.issue[0].details.text).toMatch(/onclick.*txt-1|txt-1.*onclick/);
    expect(await count()).toBe(before);
  });

  it("refuses an entity-encoded script URL in a contained resource's narrative; nothing is stored", async () => {
    const before = await count();
    const contained = [{ resourceType: 'Practitioner', id: 'p1', text: { status: 'generated', div: div('<a href="&#x6A;avascript:alert(1)">x</a>') } }];
    const res = await api.call('/Condition', { method: 'POST', json: condition({ contained, asserter: { reference: '#p1' } }) });
    expect(res.status).toBe(400);
    expect(res.body.resourceType).toBe('OperationOutcome');
    expect(res.body.issue[0].expression).toEqual(['Condition.contained[0].text.div']);
    expect(res.body.issue[0].details.text).toMatch(/<a href>/);
    expect(await count()).toBe(before);
  });

  it('stores a legitimate narrative as given', async () => {
    const narrative = div(`<p><b>Hypertension</b>, since <a href="https://example.org/x?a=1&amp;b=2">2019</a></p><table><tr><td style="color:red">x</td></tr></table><img src="${PNG}" alt="dot"/>`);
    const res = await api.call('/Condition', { method: 'POST', json: condition({ text: { status: 'generated', div: narrative } }) });
    expect(res.status).toBe(201);
    expect((await api.call(`/Condition/${res.body.id}`)).body.text.div).toBe(narrative);
  });
});
