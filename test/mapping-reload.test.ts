import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createApp } from '../src/app';
import { HEALTH_ID_SYSTEM } from '../src/healthid/healthid';
import { createLogger, type LogDestination } from '../src/log';
import { defaultMappingsDir } from '../src/mapping/index';
import { MappingHolder, mappingsVersion } from '../src/mapping/holder';
import { dropCodedOnlyExamples } from './break-map';
import { jsonLines, serve, terminate } from './serve-process';
import { backend, commandDatabase, createScratchDatabase, createTestClient, startTestServer, type TestClient, type TestServer } from './harness';

/**
 * Issue 26, item 5: hot reload. SIGHUP (or, in development, a file watch) compiles every map again and runs its
 * examples; only maps that pass replace the running ones, atomically for requests in flight; the active maps'
 * version (a hash of the files) is at /readyz and in the log lines.
 */
const repoRoot = fileURLToPath(new URL('..', import.meta.url));
const scratch: string[] = [];
afterAll(() => scratch.forEach((dir) => rmSync(dir, { recursive: true, force: true })));

/** A copy of the repository's maps that a test may edit. */
function mapsCopy(): string {
  mkdirSync(join(repoRoot, 'tmp'), { recursive: true });
  const dir = mkdtempSync(join(repoRoot, 'tmp', 'reload-'));
  scratch.push(dir);
  cpSync(defaultMappingsDir, dir, { recursive: true });
  dropCodedOnlyExamples(dir, 'diagnosis.examples.yaml'); // the tests edit the map to read a code before its display
  return dir;
}
function edit(file: string, from: string, to: string): void {
  const text = readFileSync(file, 'utf8');
  expect(text).toContain(from);
  writeFileSync(file, text.replace(from, to));
}

// A coded-only Condition reads by its display; the edit makes it read by its code (what an informaticist might
// change on a running server). Writing is unchanged, so the examples still pass.
const READ_DISPLAY = 'display_name: code.text | code.coding.display | code.coding.code';
const READ_CODE = 'display_name: code.text | code.coding.code | code.coding.display';
/** A mistake the compiler finds: an unknown element, on the diagnosis map's `display_name` line. */
const BROKEN = 'display_name: code.txt | code.coding.display | code.coding.code';
/** An example that no longer matches its map: its expected FHIR side says another code. */
const EXAMPLE_FROM = '          code: B50.9';
const EXAMPLE_TO = '          code: B50.8';

/** Captures a logger's JSON lines. */
function capture() {
  let text = '';
  const destination: LogDestination = { out: { write: (l: string) => (text += l) }, err: { write: (l: string) => (text += l) } };
  return { destination, lines: () => text.split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, any>) };
}

describe('the mapping holder (unit)', () => {
  it('pins one MappingSet to a request from start to end, whatever a reload swaps in meanwhile', async () => {
    const dir = mapsCopy();
    const holder = new MappingHolder(dir);
    const before = holder.get('diagnosis');
    const inFlight: unknown[] = [];
    await holder.pin(async () => {
      inFlight.push(holder.get('diagnosis'));
      edit(join(dir, 'diagnosis.map.yaml'), READ_DISPLAY, READ_CODE);
      expect(holder.reload()).toMatchObject({ ok: true });
      await Promise.resolve();
      inFlight.push(holder.get('diagnosis'), holder.current().get('diagnosis'));
    });
    expect(inFlight).toEqual([before, before, before]);
    expect(holder.get('diagnosis')).not.toBe(before);
  });

  it('versions the maps by their content: an edit changes it, an edit undone restores it', () => {
    const dir = mapsCopy();
    const first = mappingsVersion(dir);
    expect(first).toMatch(/^[0-9a-f]{16}$/);
    edit(join(dir, 'diagnosis.map.yaml'), READ_DISPLAY, READ_CODE);
    expect(mappingsVersion(dir)).not.toBe(first);
    edit(join(dir, 'diagnosis.map.yaml'), READ_CODE, READ_DISPLAY);
    expect(mappingsVersion(dir)).toBe(first);
  });
});

describe('reload on a running server', () => {
  let pont: TestServer;
  let dir: string;
  let operator: TestClient;
  let reader: TestClient;
  let healthId: string;
  let conditionId: string;
  const call = (client: TestClient, path: string, init: RequestInit & { json?: unknown } = {}) =>
    pont.json(path, { ...init, headers: { ...client.headers, ...(init.headers as Record<string, string>) } });
  const diagnosis = async () => {
    const res = await call(reader, `/api/v1/connect/patient/${healthId}/records?type=diagnoses`);
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    return res.body.records.diagnoses.find((d: any) => d.id === conditionId);
  };
  const readyVersion = async () => (await pont.json('/readyz')).body.mappings_version;
  /** The lines the server logs from now on. */
  const logs = () => {
    const sink = capture();
    pont.services.log = createLogger('info', sink.destination);
    return sink;
  };

  beforeAll(async () => {
    dir = mapsCopy();
    pont = await startTestServer({ PONT_MAPPINGS_DIR: dir });
    operator = await createTestClient(pont, ['fhir:read', 'fhir:write'], { organizationId: 'org-operator', allPatients: true });
    reader = await createTestClient(pont, ['consents:write', 'patient:diagnostics:read'], { organizationId: 'org-reader' });
    const created = await call(operator, '/api/fhir/R4/Patient', { method: 'POST', json: { resourceType: 'Patient', name: [{ family: 'Okafor', given: ['Ada'] }], gender: 'female', birthDate: '1980-02-03' } });
    expect(created.status).toBe(201);
    healthId = created.body.identifier.find((i: any) => i.system === HEALTH_ID_SYSTEM).value;
    const expires_at = new Date(Date.now() + 365 * 86_400_000).toISOString();
    expect((await call(reader, `/api/v1/connect/patient/${healthId}/consent/grant`, { method: 'POST', json: { consent_type: 'full_record', expires_at } })).status).toBe(201);
    const condition = await call(operator, '/api/fhir/R4/Condition', {
      method: 'POST',
      json: { resourceType: 'Condition', subject: { reference: `Patient/${created.body.id}` }, code: { coding: [{ system: 'http://snomed.info/sct', code: '195967001', display: 'Asthma' }] } },
    });
    expect(condition.status, JSON.stringify(condition.body)).toBe(201);
    conditionId = condition.body.id;
  }, 120_000);
  afterAll(async () => {
    await pont?.close();
  });

  it('shows the active maps version at /readyz', async () => {
    expect(await pont.json('/readyz')).toMatchObject({ status: 200, body: { status: 'ok', mappings_version: mappingsVersion(dir) } });
  });

  it('an edited map is used by the next request, and the version changes', async () => {
    expect(await diagnosis()).toMatchObject({ display_name: 'Asthma' });
    const before = await readyVersion();
    edit(join(dir, 'diagnosis.map.yaml'), READ_DISPLAY, READ_CODE);
    const sink = logs();
    expect(pont.reloadMappings('test')).toMatchObject({ ok: true, version: mappingsVersion(dir), previous: before });
    expect(await diagnosis()).toMatchObject({ display_name: '195967001' });
    expect(await readyVersion()).toBe(mappingsVersion(dir));
    expect(sink.lines()).toContainEqual(expect.objectContaining({ level: 'info', msg: 'mappings reloaded', version: mappingsVersion(dir), previous: before, trigger: 'test' }));
  });

  it('a broken edit keeps the running maps and logs file:line:col', async () => {
    const running = await readyVersion();
    const map = join(dir, 'diagnosis.map.yaml');
    const line = readFileSync(map, 'utf8').split('\n').findIndex((l) => l.startsWith('  display_name: code.text')) + 1;
    edit(map, READ_CODE, BROKEN);
    const sink = logs();
    const outcome = pont.reloadMappings('test');
    expect(outcome).toMatchObject({ ok: false, version: running });
    expect(await readyVersion()).toBe(running);
    expect(await diagnosis()).toMatchObject({ display_name: '195967001' });
    const [logged] = sink.lines().filter((l) => l.msg === 'mappings reload refused; the running maps stay');
    expect(logged).toMatchObject({ level: 'error', version: running, trigger: 'test' });
    expect(logged!.error).toMatch(new RegExp(`diagnosis\\.map\\.yaml:${line}:\\d+: .*txt`));
    edit(map, BROKEN, READ_CODE);
  });

  it('a failing example refuses the reload', async () => {
    const running = await readyVersion();
    edit(join(dir, 'diagnosis.examples.yaml'), EXAMPLE_FROM, EXAMPLE_TO);
    const sink = logs();
    expect(pont.reloadMappings('test')).toMatchObject({ ok: false, version: running });
    expect(sink.lines().find((l) => l.msg === 'mappings reload refused; the running maps stay')?.error).toMatch(/diagnosis\.examples\.yaml:\d+:\d+: /);
    expect(await readyVersion()).toBe(running);
    edit(join(dir, 'diagnosis.examples.yaml'), EXAMPLE_TO, EXAMPLE_FROM);
    expect(pont.reloadMappings('test')).toMatchObject({ ok: true, version: running });
  });

  it('a shape the OpenAPI document cannot take (named like one of its own schemas) refuses the reload; the document still answers', async () => {
    const running = await readyVersion();
    edit(join(dir, 'immunization.map.yaml'), '  shape: Immunization', '  shape: Error');
    const sink = logs();
    expect(pont.reloadMappings('test')).toMatchObject({ ok: false, version: running });
    expect(sink.lines().find((l) => l.msg === 'mappings reload refused; the running maps stay')?.error).toMatch(/immunization\.map\.yaml:\d+:\d+: .*the shape name `Error` is taken/);
    expect(await readyVersion()).toBe(running);
    const doc = await pont.json('/api/openapi.json');
    expect(doc.status).toBe(200);
    expect(doc.body.components.schemas.Immunization).toBeDefined();
    edit(join(dir, 'immunization.map.yaml'), '  shape: Error', '  shape: Immunization');
    expect(pont.reloadMappings('test')).toMatchObject({ ok: true, version: running });
  });

  it('a request in flight keeps the maps it began with; the next one has the reloaded maps', async () => {
    // The real app's middleware chain, with a probe after its routes that waits, mid-request, for a reload.
    const app = createApp(pont.services);
    let release!: () => void;
    let arrived!: () => void;
    const reached = new Promise<void>((resolve) => (arrived = resolve));
    const gate = new Promise<void>((resolve) => (release = resolve));
    app.use(async (ctx) => {
      const first = pont.services.mappings.get('diagnosis');
      const version = pont.services.mappings.version;
      if (ctx.path === '/probe/wait') {
        arrived();
        await gate;
      }
      ctx.body = { version, same: pont.services.mappings.get('diagnosis') === first && pont.services.mappings.version === version };
    });
    const server = app.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const running = await readyVersion();
      const inFlight = fetch(`${base}/probe/wait`).then((r) => r.json());
      await reached;
      const map = join(dir, 'diagnosis.map.yaml');
      const text = readFileSync(map, 'utf8');
      writeFileSync(map, text.includes(READ_CODE) ? text.replace(READ_CODE, READ_DISPLAY) : text.replace(READ_DISPLAY, READ_CODE));
      expect(pont.reloadMappings('test')).toMatchObject({ ok: true, previous: running });
      release();
      expect(await inFlight).toEqual({ version: running, same: true });
      expect(await (await fetch(`${base}/probe/now`)).json()).toEqual({ version: mappingsVersion(dir), same: true });
    } finally {
      server.close();
    }
  });

  it('a shape the OpenAPI document cannot take refuses to start', async () => {
    const broken = mapsCopy();
    edit(join(broken, 'immunization.map.yaml'), '  shape: Immunization', '  shape: Error');
    // At the map, as its other problems: file:line:column.
    await expect(startTestServer({ PONT_MAPPINGS_DIR: broken })).rejects.toThrow(/immunization\.map\.yaml:\d+:\d+: .*the shape name `Error` is taken/);
  });

  it('a failing example refuses to start, naming the example', async () => {
    const broken = mapsCopy();
    edit(join(broken, 'diagnosis.examples.yaml'), EXAMPLE_FROM, EXAMPLE_TO);
    await expect(startTestServer({ PONT_MAPPINGS_DIR: broken })).rejects.toThrow(/diagnosis\.examples\.yaml:\d+:\d+: /);
  });
});

describe('the file watch (development)', () => {
  it('reloads when a map changes, and refuses PONT_MAPPINGS_WATCH outside development', async () => {
    const dir = mapsCopy();
    const pont = await startTestServer({ PONT_MAPPINGS_DIR: dir, PONT_MAPPINGS_WATCH: 'true' });
    try {
      const before = (await pont.json('/readyz')).body.mappings_version;
      edit(join(dir, 'diagnosis.map.yaml'), READ_DISPLAY, READ_CODE);
      await vi.waitFor(async () => expect((await pont.json('/readyz')).body.mappings_version).not.toBe(before), { timeout: 20_000, interval: 100 });
      expect((await pont.json('/readyz')).body.mappings_version).toBe(mappingsVersion(dir));
    } finally {
      await pont.close();
    }
    await expect(startTestServer({ PONT_ENV: 'sandbox', PONT_MAPPINGS_WATCH: 'true' })).rejects.toThrow(/PONT_MAPPINGS_WATCH: only in development/);
  }, 60_000);
});

const readyzVersion = async (url: string) => ((await (await fetch(`${url}/readyz`)).json()) as { mappings_version: string }).mappings_version;

describe('SIGHUP to pont serve', () => {
  let server: ChildProcess | undefined;
  afterAll(() => void server?.kill('SIGKILL'));

  it('reloads the maps instead of stopping the server', async () => {
    const database = await commandDatabase();
    const dir = mapsCopy();
    try {
      const started = await serve([], { ...database.env, PONT_MAPPINGS_DIR: dir });
      server = started.child;
      const before = mappingsVersion(dir);
      await vi.waitFor(() => expect(jsonLines(started.output())).toContainEqual(expect.objectContaining({ msg: 'pont started', mappings_version: before })), { timeout: 10_000, interval: 50 });
      expect(await readyzVersion(started.url)).toBe(before);
      edit(join(dir, 'diagnosis.map.yaml'), READ_DISPLAY, READ_CODE);
      server.kill('SIGHUP');
      await vi.waitFor(() => expect(jsonLines(started.output()).some((l) => l.msg === 'mappings reloaded')).toBe(true), { timeout: 20_000, interval: 50 });
      expect(server.exitCode).toBe(null);
      expect(await readyzVersion(started.url)).toBe(mappingsVersion(dir));
      expect(await terminate(server)).toBe(0);
      server = undefined;
    } finally {
      await database.cleanup();
    }
  }, 120_000);

  it.runIf(backend === 'postgres')('with --workers 2, every worker reloads and reports the new version', async () => {
    const database = await createScratchDatabase({ migrated: true });
    const dir = mapsCopy();
    try {
      const started = await serve(['--workers', '2'], { DATABASE_URL: database.url, PONT_MAPPINGS_DIR: dir });
      server = started.child;
      await vi.waitFor(() => expect(started.output()).toMatch(/2 worker processes/), { timeout: 60_000, interval: 50 });
      edit(join(dir, 'diagnosis.map.yaml'), READ_DISPLAY, READ_CODE);
      const after = mappingsVersion(dir);
      server.kill('SIGHUP');
      const reloaded = () => jsonLines(started.output()).filter((l) => l.msg === 'mappings reloaded' && l.version === after);
      await vi.waitFor(() => expect(new Set(reloaded().map((l) => l.pid)).size).toBe(2), { timeout: 30_000, interval: 50 });
      expect(server.exitCode).toBe(null);
      for (let i = 0; i < 6; i++) expect(await readyzVersion(started.url)).toBe(after);
      expect(await terminate(server)).toBe(0);
      server = undefined;
    } finally {
      await database.drop();
    }
  }, 180_000);
});
