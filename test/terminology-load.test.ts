import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestClient, runPont, startTestServer, type TestClient, type TestServer } from './harness';

// `pont terminology load` as an operator runs it (a process of its own) on the database of a running service: what it
// loads the service answers at once (no cache), a reload replaces a version whole, and bad hierarchies are refused
// with a message naming the fault (exit code 1), leaving what was loaded before untouched.

const CS = 'http://example.org/fhir/CodeSystem/reload-test';
let pont: TestServer;
let client: TestClient;
let dir: string;
let env: Record<string, string>;

const codeSystem = (display: string, extra: object[] = []) => ({
  resourceType: 'CodeSystem',
  id: 'reload-test',
  url: CS,
  version: '1',
  content: 'complete',
  concept: [{ code: 'root', display: 'Root', concept: [{ code: 'a', display }, ...extra] }],
});
const file = (name: string, content: unknown) => {
  const path = join(dir, name);
  writeFileSync(path, typeof content === 'string' ? content : JSON.stringify(content));
  return path;
};
const display = async (code: string) => {
  const { status, body } = await pont.json(`/api/fhir/R4/CodeSystem/$lookup?system=${encodeURIComponent(CS)}&code=${code}`, { headers: client.headers });
  return status === 200 ? body.parameter.find((p: any) => p.name === 'display').valueString : status;
};

// On PostgreSQL (the file runs once, there): the command and the service share the database by its URL.
beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'pont-term-'));
  pont = await startTestServer();
  env = { DATABASE_URL: pont.config.databaseUrl! };
  client = await createTestClient(pont, ['terminology:read']);
});
afterAll(async () => {
  await pont?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('pont terminology load', () => {
  it('loads a CodeSystem, and a reload of its version replaces it whole, seen by the running service at once', async () => {
    const first = await runPont(env, 'terminology', 'load', file('v1.json', codeSystem('First')));
    expect(first.code, first.stderr).toBe(0);
    expect(first.json.loaded).toEqual([{ resourceType: 'CodeSystem', url: CS, version: '1', id: 'reload-test', count: 2, replaced: false, reexpanded: [] }]);
    expect(await display('a')).toBe('First');
    const second = await runPont(env, 'terminology', 'load', file('v1b.json', codeSystem('Second', [{ code: 'b', display: 'Bee' }])));
    expect(second.code, second.stderr).toBe(0);
    expect(second.json.loaded[0]).toMatchObject({ count: 3, replaced: true });
    expect(await display('a')).toBe('Second');
    expect(await display('b')).toBe('Bee');
  });

  it('reads NDJSON, one resource a line, and expands a value set loaded before its code system once the code system comes', async () => {
    const vs = { resourceType: 'ValueSet', id: 'late', url: 'http://example.org/fhir/ValueSet/late', compose: { include: [{ system: 'http://example.org/late', filter: [{ property: 'concept', op: 'is-a', value: 'x' }] }] } };
    const cs = { resourceType: 'CodeSystem', url: 'http://example.org/late', content: 'complete', concept: [{ code: 'x', concept: [{ code: 'y' }] }] };
    const loaded = await runPont(env, 'terminology', 'load', file('late.ndjson', `${JSON.stringify(vs)}\n\n${JSON.stringify(cs)}\n`));
    expect(loaded.code, loaded.stderr).toBe(0);
    expect(loaded.json.loaded[0]).toMatchObject({ resourceType: 'ValueSet', count: 0, unexpandable: expect.stringMatching(/http:\/\/example.org\/late.*not loaded/) });
    expect(loaded.json.loaded[1]).toMatchObject({ resourceType: 'CodeSystem', count: 2, reexpanded: ['http://example.org/fhir/ValueSet/late'] });
    const { body } = await pont.json('/api/fhir/R4/ValueSet/late/$expand', { headers: client.headers });
    expect(body.expansion.contains.map((c: any) => c.code)).toEqual(['x', 'y']);
  });

  it('refuses a cyclic hierarchy, an unknown parent and a code given twice, naming them, and keeps what was loaded', async () => {
    const cyclic = {
      ...codeSystem('Cyclic'),
      concept: [
        { code: 'root', display: 'Root' },
        { code: 'a', property: [{ code: 'parent', valueCode: 'c' }] },
        { code: 'b', property: [{ code: 'parent', valueCode: 'a' }] },
        { code: 'c', property: [{ code: 'parent', valueCode: 'b' }] },
      ],
    };
    const result = await runPont(env, 'terminology', 'load', file('cyclic.json', cyclic));
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/cyclic\.json: CodeSystem http:\/\/example.org\/fhir\/CodeSystem\/reload-test: the hierarchy has a cycle: (a|b|c) -> (a|b|c) -> (a|b|c) -> \1/);
    const orphan = await runPont(env, 'terminology', 'load', file('orphan.json', { ...codeSystem('Orphan'), concept: [{ code: 'a', property: [{ code: 'parent', valueCode: 'nowhere' }] }] }));
    expect(orphan.code).toBe(1);
    expect(orphan.stderr).toMatch(/not in it: nowhere above a/);
    const twice = await runPont(env, 'terminology', 'load', file('twice.json', { ...codeSystem('Twice'), concept: [{ code: 'a' }, { code: 'a' }] }));
    expect(twice.code).toBe(1);
    expect(twice.stderr).toMatch(/code a is given twice/);
    expect(await display('a')).toBe('Second'); // the version loaded before stands
  });

  it('keeps a reloaded code system when a step after its switch fails (the removal of the version it replaced)', async () => {
    const url = 'http://example.org/fhir/CodeSystem/after-switch';
    const cs = (d: string) => ({ resourceType: 'CodeSystem', id: 'after-switch', url, version: '1', content: 'complete', concept: [{ code: 'x', display: d }] });
    const lookup = async () => {
      const { status, body } = await pont.json(`/api/fhir/R4/CodeSystem/$lookup?system=${encodeURIComponent(url)}&code=x`, { headers: client.headers });
      return status === 200 ? body.parameter.find((p: any) => p.name === 'display').valueString : status;
    };
    expect((await runPont(env, 'terminology', 'load', file('after1.json', cs('One')))).code).toBe(0);
    // A deliberately broken state: the retired version cannot be removed, so the clean-up after the switch fails.
    const db = pont.services.db;
    await db.exec(`CREATE FUNCTION test_refuse_retired_delete() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'refused by the test'; END $$;
      CREATE TRIGGER test_refuse_retired_delete BEFORE DELETE ON term_code_systems FOR EACH ROW
        WHEN (OLD.url = '${url}' AND OLD.state = 'retired') EXECUTE FUNCTION test_refuse_retired_delete()`);
    try {
      const second = await runPont(env, 'terminology', 'load', file('after2.json', cs('Two')));
      expect(second.stderr).toMatch(/refused by the test/); // reported
      expect(second.json.loaded[0]).toMatchObject({ url, replaced: true });
      expect(await lookup()).toBe('Two'); // the new version is served, not dropped
    } finally {
      await db.exec('DROP TRIGGER test_refuse_retired_delete ON term_code_systems; DROP FUNCTION test_refuse_retired_delete()');
    }
    const third = await runPont(env, 'terminology', 'load', file('after3.json', cs('Three'))); // and the retired one is removed later
    expect(third.code, third.stderr).toBe(0);
    expect(await lookup()).toBe('Three');
    expect((await db.query(`SELECT count(*)::int AS n FROM term_code_systems WHERE url = $1`, [url])).rows[0]).toEqual({ n: 1 });
  });

  it('refuses a hierarchy deeper than 64 levels (a chain of 3,000 concepts would be 4.5 million closure rows), keeping what was loaded', async () => {
    const chain = (n: number) => ({
      ...codeSystem('Deep'),
      concept: Array.from({ length: n }, (_, i) => ({ code: `c${i}`, ...(i && { property: [{ code: 'parent', valueCode: `c${i - 1}` }] }) })),
    });
    const deepest = await runPont(env, 'terminology', 'load', file('deep64.json', { ...chain(65), id: 'reload-test-deep', url: `${CS}-deep` }));
    expect(deepest.code, deepest.stderr).toBe(0); // 64 levels below the top: allowed
    const deep = await runPont(env, 'terminology', 'load', file('deep.json', chain(3000)));
    expect(deep.code).toBe(1);
    expect(deep.stderr).toMatch(/deep\.json: CodeSystem http:\/\/example.org\/fhir\/CodeSystem\/reload-test: the hierarchy is deeper than 64 levels/);
    expect(await display('a')).toBe('Second'); // the version loaded before stands
  });

  it('refuses a value set whose regex PostgreSQL cannot read when it is loaded, so its code system still loads after it', async () => {
    const system = 'http://example.org/regex-cs';
    const vs = { resourceType: 'ValueSet', id: 'bad-regex', url: 'http://example.org/fhir/ValueSet/bad-regex', compose: { include: [{ system, filter: [{ property: 'code', op: 'regex', value: '\\p{L}+' }] }] } };
    const cs = { resourceType: 'CodeSystem', id: 'regex-cs', url: system, content: 'complete', concept: [{ code: 'x', display: 'Ex' }] };
    const loaded = await runPont(env, 'terminology', 'load', file('bad-regex.ndjson', `${JSON.stringify(vs)}\n${JSON.stringify(cs)}\n`));
    expect(loaded.code).toBe(1);
    expect(loaded.stderr).toMatch(/bad-regex\.ndjson: ValueSet http:\/\/example.org\/fhir\/ValueSet\/bad-regex: .*regex.*is not a regular expression/);
    expect(loaded.stderr.trim().split('\n')).toHaveLength(1); // the code system after it loaded
    const lookup = await pont.json(`/api/fhir/R4/CodeSystem/$lookup?system=${encodeURIComponent(system)}&code=x`, { headers: client.headers });
    expect(lookup.status).toBe(200);
  });

  it('marks a value set unexpandable when its re-expansion fails, and loads the code system (one stored before the check)', async () => {
    const system = 'http://example.org/regex-cs-2';
    const bad = { resourceType: 'ValueSet', id: 'old-bad-regex', url: 'http://example.org/fhir/ValueSet/old-bad-regex', compose: { include: [{ system, filter: [{ property: 'code', op: 'regex', value: '\\p{L}+' }] }] } };
    // As a Pont without the load-time check stored it: active, unexpandable while its code system was not loaded.
    await pont.services.db.query(
      `INSERT INTO term_value_sets (url, version, resource_id, state, resource, depends, unexpandable) VALUES ($1, '', 'old-bad-regex', 'active', $2, $3, 'not loaded yet')`,
      [bad.url, JSON.stringify(bad), [system]],
    );
    const cs = { resourceType: 'CodeSystem', id: 'regex-cs-2', url: system, content: 'complete', concept: [{ code: 'x', display: 'Ex' }] };
    const loaded = await runPont(env, 'terminology', 'load', file('regex-cs-2.json', cs));
    expect(loaded.code, loaded.stderr).toBe(0);
    expect(loaded.json.loaded[0]).toMatchObject({ resourceType: 'CodeSystem', url: system, count: 1, reexpanded: [bad.url] });
    const expand = await pont.json('/api/fhir/R4/ValueSet/old-bad-regex/$expand', { headers: client.headers });
    expect(expand.status).toBe(422);
    expect(JSON.stringify(expand.body)).toMatch(/cannot be expanded: .*regular expression/);
  });

  it('loads a SNOMED CT RF2 snapshot (a directory): is-a relationships as the hierarchy, the preferred synonym as display', async () => {
    const result = await runPont(env, 'terminology', 'load', 'test/terminology/rf2');
    expect(result.code, result.stderr).toBe(0);
    expect(result.json.loaded).toEqual([
      { resourceType: 'CodeSystem', url: 'http://snomed.info/sct', version: 'http://snomed.info/sct/900000000000207008/version/20250101', id: 'snomedct', count: 5, replaced: false, reexpanded: [] },
    ]);
    const lookup = async (code: string) =>
      (await pont.json(`/api/fhir/R4/CodeSystem/snomedct/$lookup?code=${code}`, { headers: client.headers })).body.parameter as any[];
    const widget = await lookup('400003');
    expect(widget.find((p) => p.name === 'display').valueString).toBe('Frobnicated widget');
    const parents = widget.filter((p) => p.name === 'property' && p.part[0].valueCode === 'parent').map((p) => p.part[1].valueCode);
    expect(parents).toEqual(['200001', '300002']); // the inactive is-a and the other attribute are not the hierarchy
    expect(widget.filter((p) => p.name === 'designation').map((d) => d.part.find((x: any) => x.name === 'value').valueString)).toEqual(['Frobnicated widget (disorder)', 'Frobnicated widget']);
    const frob = await lookup('200001');
    expect(frob.filter((p) => p.name === 'designation')).toHaveLength(2); // not the inactive description
    const retired = await lookup('500004');
    expect(retired.find((p) => p.name === 'display').valueString).toBe('Retired thing (disorder)'); // no preferred synonym: the FSN
    expect(retired.find((p) => p.name === 'property' && p.part[0].valueCode === 'inactive').part[1].valueBoolean).toBe(true);
    const subsumes = await pont.json(`/api/fhir/R4/CodeSystem/$subsumes?system=http://snomed.info/sct&codeA=100000&codeB=400003`, { headers: client.headers });
    expect(subsumes.body.parameter[0].valueCode).toBe('subsumes');
  });

  it('loads a LOINC table (Loinc.csv columns, quoted fields), its version given', async () => {
    const result = await runPont(env, 'terminology', 'load', 'test/terminology/Loinc.csv', '--version', '2.99');
    expect(result.code, result.stderr).toBe(0);
    expect(result.json.loaded[0]).toMatchObject({ url: 'http://loinc.org', version: '2.99', id: 'loinc', count: 3 });
    const lookup = async (code: string) =>
      (await pont.json(`/api/fhir/R4/CodeSystem/$lookup?system=http://loinc.org&code=${code}`, { headers: client.headers })).body.parameter as any[];
    const prop = (params: any[], code: string) => params.find((p) => p.name === 'property' && p.part[0].valueCode === code)?.part[1];
    const free = await lookup('90002-9');
    expect(free.find((p) => p.name === 'display').valueString).toBe('Frobnicin, free [Mass/volume] in Blood');
    expect(prop(free, 'COMPONENT').valueString).toBe('Frobnicin, "free"');
    expect(prop(free, 'inactive').valueBoolean).toBe(true); // DEPRECATED
    expect(prop(await lookup('90003-7'), 'COMPONENT').valueString).toBe('Multi\nline');
    expect(prop(await lookup('90001-1'), 'CLASS').valueString).toBe('CHEM');
  });

  it('refuses files that are not terminology, with exit code 1 and the file named; a missing file too', async () => {
    const patient = await runPont(env, 'terminology', 'load', file('patient.json', { resourceType: 'Patient' }));
    expect(patient.code).toBe(1);
    expect(patient.stderr).toMatch(/patient\.json: a Patient is not terminology/);
    const broken = await runPont(env, 'terminology', 'load', file('broken.ndjson', '{"resourceType":"CodeSystem"\n'));
    expect(broken.code).toBe(1);
    expect(broken.stderr).toMatch(/broken\.ndjson:1: not JSON/);
    const nourl = await runPont(env, 'terminology', 'load', file('nourl.json', { resourceType: 'CodeSystem', content: 'complete' }));
    expect(nourl.code).toBe(1);
    expect(nourl.stderr).toMatch(/needs a url/);
    const missing = await runPont(env, 'terminology', 'load', join(dir, 'nope.json'));
    expect(missing.code).toBe(1);
    expect(missing.stderr).toMatch(/nope\.json: no such file/);
  });
});
