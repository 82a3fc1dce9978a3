/**
 * The start-up backfill (src/fhir/store/backfill.ts): Patients an older version stored without a Health ID get one at
 * start, match keys of an earlier rule are made again, a second start touches nothing, and a Patient the store would
 * now refuse is left as it is and logged: it does not stop the start, nor is it tried again and again.
 */
import { randomUUID } from 'node:crypto';
import type { Patient } from '@medplum/fhirtypes';
import pg from 'pg';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { loadConfig } from '../src/config';
import { MATCH_RULE_VERSION } from '../src/healthid/matching';
import { startPont, type RunningPont } from '../src/server';
import { createScratchDatabase } from './harness';

const HEALTH_ID_SYSTEM = 'https://pont.health/fhir/sid/health-id';

let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
let sql: pg.Client;
let running: RunningPont | undefined;
beforeAll(async () => {
  scratch = await createScratchDatabase({ migrated: true });
  sql = new pg.Client({ connectionString: scratch.url });
  await sql.connect();
});
afterEach(async () => {
  await running?.close();
  running = undefined;
  vi.restoreAllMocks();
});
afterAll(async () => {
  await sql?.end();
  await scratch?.drop();
});

const stderrWrite = process.stderr.write.bind(process.stderr) as (...args: any[]) => boolean;

/** A start of the service on the test's database, with its warn and error lines (stderr, src/log.ts) collected. */
async function start(): Promise<{ pont: RunningPont; warnings: Array<Record<string, any>> }> {
  const warnings: Array<Record<string, any>> = [];
  vi.restoreAllMocks();
  vi.spyOn(process.stderr, 'write').mockImplementation((chunk: any, ...rest: any[]) => {
    for (const line of String(chunk).split('\n'))
      if (line.startsWith('{')) {
        try {
          warnings.push(JSON.parse(line));
          continue;
        } catch {
          /* not a log line */
        }
      }
    return stderrWrite(chunk, ...rest);
  });
  running = await startPont(loadConfig({ PORT: '0', LOG_LEVEL: 'warn', PONT_RETENTION_START_DELAY: '1h', DATABASE_URL: scratch.url }));
  return { pont: running, warnings };
}

/** A Patient row as a version before Health IDs (and before the repository, migration 006) wrote it: the row alone. */
async function storeAsOlderVersion(patient: Record<string, unknown>): Promise<string> {
  const id = randomUUID();
  await sql.query(`INSERT INTO fhir_resources (resource_type, id, version_id, last_updated, method, content) VALUES ('Patient', $1, 1, now(), 'PUT', $2)`, [
    id,
    { resourceType: 'Patient', id, meta: { versionId: '1', lastUpdated: new Date(0).toISOString() }, ...patient },
  ]);
  return id;
}

const healthIdRow = async (id: string) => (await sql.query('SELECT health_id, match_key, match_key_version FROM health_ids WHERE patient_id = $1', [id])).rows[0];
const stored = async (id: string) => (await sql.query(`SELECT version_id, content FROM fhir_resources WHERE resource_type = 'Patient' AND id = $1`, [id])).rows[0];

describe('the start-up backfill', () => {
  const ids: Record<string, string> = {};

  it('issues a Health ID to each Patient stored without one and upgrades match keys of an earlier rule; one Patient that fails validation is logged and left, and the start goes on', { timeout: 20_000 }, async () => {
    // One registered under an earlier match rule: its key is made again.
    const first = await start();
    const registered = await first.pont.services.fhir.system('test').create<Patient>({ resourceType: 'Patient', name: [{ family: 'Old', given: ['Rule'] }], birthDate: '1970-01-01' });
    ids.oldRule = registered.id!;
    await first.pont.close();
    running = undefined;
    await sql.query(`UPDATE health_ids SET match_key = 'v1-key', match_key_version = 1 WHERE patient_id = $1`, [ids.oldRule]);
    ids.amina = await storeAsOlderVersion({ name: [{ family: 'Ngo', given: ['Amina'] }], birthDate: '1990-04-01', gender: 'female' });
    // Stored by a version that took a day the calendar does not have (R4's regex alone allows it): refused now.
    ids.bad = await storeAsOlderVersion({ name: [{ family: 'Leap', given: ['Bad'] }], birthDate: '2023-02-30' });
    ids.jean = await storeAsOlderVersion({ name: [{ family: 'Dongo', given: ['Jean'] }], birthDate: '1985-12-31', gender: 'male' });
    for (const name of ['amina', 'bad', 'jean']) expect(await healthIdRow(ids[name]!)).toBeUndefined();

    const { pont, warnings } = await start();
    for (const name of ['amina', 'jean']) {
      const row = await healthIdRow(ids[name]!);
      expect(row, name).toBeDefined();
      expect(row.match_key_version).toBe(MATCH_RULE_VERSION);
      const { content } = await stored(ids[name]!);
      expect(content.identifier).toEqual([{ system: HEALTH_ID_SYSTEM, value: row.health_id }]);
    }
    const upgraded = await healthIdRow(ids.oldRule);
    expect(upgraded.match_key_version).toBe(MATCH_RULE_VERSION);
    expect(upgraded.match_key).toBe(pont.services.fhir.matchKeyOf((await stored(ids.oldRule)).content));
    // The Patient that fails validation: as it was, without a Health ID, and one warning naming it and why.
    expect(await healthIdRow(ids.bad!)).toBeUndefined();
    expect((await stored(ids.bad!)).version_id).toBe('1');
    const logged = warnings.filter((w) => w.id === ids.bad);
    expect(logged, JSON.stringify(warnings)).toHaveLength(1);
    expect(logged[0]).toMatchObject({ level: 'warn', resource_type: 'Patient', id: ids.bad, status: 400, reason: 'VALIDATION_FAILED at Patient.birthDate' });
    // The service answers.
    expect((await fetch(`${pont.url}/healthz`)).status).toBe(200);
  });

  it('a second start touches nothing: no new version, Health ID or match key; the Patient still refused is logged once more, not retried in a loop', { timeout: 20_000 }, async () => {
    const snapshot = async () => ({
      resources: (await sql.query(`SELECT id, version_id FROM fhir_resources ORDER BY rid`)).rows,
      versions: (await sql.query('SELECT count(*)::int AS n FROM fhir_resource_versions')).rows[0].n,
      healthIds: (await sql.query('SELECT health_id, patient_id, match_key, match_key_version FROM health_ids ORDER BY health_id')).rows,
    });
    const before = await snapshot();
    const { warnings } = await start();
    expect(await snapshot()).toEqual(before);
    expect(warnings.filter((w) => w.id === ids.bad)).toHaveLength(1);
  });
});
