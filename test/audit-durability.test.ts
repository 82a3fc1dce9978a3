import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auditRow, insertAuditRows } from '../src/audit/audit';
import { createClient } from '../src/auth/clients';
import type { Database } from '../src/db/database';
import { openPostgres } from '../src/db/postgres';
import { backend, createScratchDatabase, pontCommand } from './harness';

/**
 * The audit trail commits reads in groups, off the request's own path: still, a response is sent only once its
 * audit row is committed. A server killed with SIGKILL in the middle of a burst of audited reads must have an
 * audit row for every response a client received. PostgreSQL only: a real second process on one database.
 */
const repoRoot = fileURLToPath(new URL('..', import.meta.url));

describe.runIf(backend === 'postgres')('audit trail durability', () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
  let db: Database;
  let server: ChildProcess | undefined;

  beforeAll(async () => {
    scratch = await createScratchDatabase({ migrated: true });
    db = await openPostgres(scratch.url, 2);
  });
  afterAll(async () => {
    server?.kill('SIGKILL');
    await db?.close();
    await scratch?.drop();
  });

  /** `pont serve` in a process of its own; resolves with its base URL once it listens. */
  async function startServer(): Promise<string> {
    server = spawn(process.execPath, pontCommand('serve'), {
      cwd: repoRoot,
      env: { ...process.env, DATABASE_URL: scratch.url, PORT: '0', HOST: '127.0.0.1', LOG_LEVEL: 'error', PONT_RATE_LIMITS: 'fhir=1000000/60' },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    return new Promise((resolve, reject) => {
      server!.stdout!.on('data', (chunk) => {
        out += chunk;
        const url = /listening on (http:\/\/\S+)/.exec(out)?.[1];
        if (url) resolve(url);
      });
      server!.once('exit', (code) => reject(new Error(`the server exited (${code}) before listening: ${out}`)));
    });
  }

  it('every response sent before a SIGKILL has its audit row', async () => {
    const url = await startServer();
    const client = await createClient(db, { name: 'reader', organizationId: 'org-a', scopes: ['fhir:read', 'fhir:write'] });
    const token = await fetch(`${url}/api/v1/connect/auth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
    }).then((r) => r.json() as Promise<{ access_token: string }>);
    const headers = { authorization: `Bearer ${token.access_token}`, 'content-type': 'application/fhir+json' };
    const patient = await fetch(`${url}/api/fhir/R4/Patient`, { method: 'POST', headers, body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Durable' }] }) }).then(
      (r) => r.json() as Promise<{ id: string }>,
    );

    // 16 clients read the patient as fast as they can; after 400 answers the server is killed mid-burst.
    const answered: string[] = [];
    let n = 0;
    let killed = false;
    const exited = once(server!, 'exit');
    await Promise.all(
      Array.from({ length: 16 }, async () => {
        while (!killed) {
          const requestId = `burst-${n++}`;
          try {
            const res = await fetch(`${url}/api/fhir/R4/Patient/${patient.id}`, { headers: { ...headers, 'x-request-id': requestId } });
            await res.arrayBuffer();
            if (res.status === 200) answered.push(requestId);
          } catch {
            return; // the connection died with the server
          }
          if (answered.length >= 400 && !killed) {
            killed = true;
            server!.kill('SIGKILL');
          }
        }
      }),
    );
    await exited;
    server = undefined;

    const { rows } = await db.query<{ request_id: string }>('SELECT request_id FROM audit_log WHERE request_id = ANY($1::text[])', [answered]);
    const recorded = new Set(rows.map((r) => r.request_id));
    expect(answered.length).toBeGreaterThanOrEqual(400);
    expect(answered.filter((id) => !recorded.has(id))).toEqual([]);
    // The rows name the reader and the patient.
    const sample = await db.query<{ actor: string; patients: string[]; action: string }>('SELECT actor, patients, action FROM audit_log WHERE request_id = $1', [answered[0]]);
    expect(sample.rows[0]).toEqual({ actor: client.client_id, patients: [patient.id], action: 'R' });
  });

  it("a group commit is asynchronous for its own transaction only, never for the connection's next", async () => {
    // One connection, so that the statement after the group commit runs where it ran.
    const single = await openPostgres(scratch.url, 1);
    try {
      const row = () => auditRow({ caller: { requestId: 'async-commit' }, operation: 'readResource', action: 'R', outcome: 'success' });
      const setting = async (sql: Pick<Database, 'query'>) => (await sql.query<{ synchronous_commit: string }>('SHOW synchronous_commit')).rows[0]!.synchronous_commit;
      // Within a transaction, the statement's setting is visible: it is what that transaction's commit obeys.
      await single.transaction(async (tx) => {
        await insertAuditRows(tx, [row()], true);
        expect(await setting(tx)).toBe('off');
      });
      await insertAuditRows(single, [row()], true);
      expect(await setting(single)).toBe('on');
      // A write's own audit row leaves its transaction's commit synchronous.
      await single.transaction(async (tx) => {
        await insertAuditRows(tx, [row()]);
        expect(await setting(tx)).toBe('on');
      });
      const { rows } = await single.query<{ n: number }>("SELECT count(*)::int AS n FROM audit_log WHERE request_id = 'async-commit'");
      expect(rows[0]!.n).toBe(3);
    } finally {
      await single.close();
    }
  });
});
