import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createClient } from '../src/auth/clients';
import { openDatabase } from '../src/db/open';
import { backend, createScratchDatabase } from './harness';
import { bearerFrom, startPontProcess, stopPontProcess, type PontProcess } from './webhooks-support';

/** One Idempotency-Key sent to two server processes at once writes once (PostgreSQL: processes share it). */
describe.runIf(backend === 'postgres')('idempotency across two server processes', () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
  const processes: PontProcess[] = [];
  let headers: Record<string, string>;

  beforeAll(async () => {
    scratch = await createScratchDatabase({ migrated: true });
    const env = { PONT_PUBLIC_URL: 'http://pont.test' };
    processes.push(await startPontProcess(scratch.url, env), await startPontProcess(scratch.url, env));
    const db = await openDatabase({ databaseUrl: scratch.url });
    const client = await createClient(db, { name: 'lab', organizationId: 'org-lab', scopes: ['health_id:verify', 'labs:write', 'fhir:read'] });
    await db.close();
    headers = await bearerFrom(processes[0]!.url, client);
  }, 120_000);
  afterAll(async () => {
    for (const p of processes) await stopPontProcess(p, 'SIGTERM');
    await scratch?.drop();
  });

  it('rounds of the same key on both processes: one Observation per key, every answer the same', async () => {
    const [a, b] = processes.map((p) => p.url) as [string, string];
    const resolved = await fetch(`${a}/api/v1/connect/patients/resolve`, { method: 'POST', headers, body: JSON.stringify({ first_name: 'Idem', last_name: 'Potent' }) });
    const healthId = ((await resolved.json()) as { health_id: string }).health_id;
    for (let round = 0; round < 5; round++) {
      const body = JSON.stringify({ health_id: healthId, test_name: `Round ${round}`, result_value: '1.5', flagged: false });
      const answers = await Promise.all(
        [a, b, a, b].map((url) => fetch(`${url}/api/v1/sdk/records/lab-results`, { method: 'POST', headers: { ...headers, 'idempotency-key': `round-${round}` }, body })),
      );
      const bodies = (await Promise.all(answers.map((r) => r.json()))) as Array<{ lab_result_id: string }>;
      expect(answers.map((r) => r.status)).toEqual([201, 201, 201, 201]);
      expect(new Set(bodies.map((x) => x.lab_result_id)).size).toBe(1);
      expect(answers.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(3);
    }
    const search = await fetch(`${a}/api/fhir/R4/Observation?code:text=Round&_summary=count`, { headers });
    expect(((await search.json()) as { total: number }).total).toBe(5);
  }, 60_000);
});
