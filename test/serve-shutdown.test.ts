import { once } from 'node:events';
import { Agent, request } from 'node:http';
import { afterAll, describe, expect, it } from 'vitest';
import { backend, commandDatabase } from './harness';
import { serve } from './serve-process';
import { eventually } from './eventually';

/**
 * SIGTERM to the server's own node process (as a container runtime sends it to PID 1) while requests are in flight:
 * every one of them is answered, new connections are refused, and the process exits 0 within PONT_SHUTDOWN_GRACE.
 */
const IN_FLIGHT = 100;
/**
 * Long enough to answer them all on a loaded machine: PGlite answers one query at a time, and beside another test
 * file on two cores a hundred searches took over a minute (the grace then cut 73 of them). The grace is the
 * operator's bound, not what is measured here: every request in flight is.
 */
const GRACE = '240s';

/** A GET on a keep-alive agent of `sockets` connections: its status, or the error code that ended it (ECONNRESET…). */
function get(agent: Agent, url: string, headers: Record<string, string>, onSent = () => {}): Promise<number | string> {
  return new Promise((resolve) => {
    const req = request(url, { agent, headers }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
      res.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    });
    req.on('error', (err: NodeJS.ErrnoException) => resolve(err.code ?? err.message));
    req.on('finish', onSent); // the whole request is written to the connection
    req.end();
  });
}

async function demoToken(url: string): Promise<string> {
  const demo: any = await (await fetch(`${url}/api/demo/reset`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' })).json();
  const { client_id, client_secret } = demo.clients[0];
  const token: any = await (
    await fetch(`${url}/api/v1/connect/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant_type: 'client_credentials', client_id, client_secret }) })
  ).json();
  return token.access_token;
}

/**
 * Sends IN_FLIGHT searches (two kinds), each on a connection of its own, SIGTERMs `pid` once every request has been
 * written to its connection (the client, on a busy machine, may take longer than the server to get them all out:
 * a request not sent yet when the signal comes is not in flight), and returns every outcome.
 */
async function searchesThroughSigterm(url: string, token: string, pid: number): Promise<Array<number | string>> {
  const agent = new Agent({ keepAlive: true, maxSockets: IN_FLIGHT });
  const headers = { authorization: `Bearer ${token}` };
  let sent = 0;
  const signal = () => ++sent === IN_FLIGHT && process.kill(pid, 'SIGTERM');
  const outcomes = Array.from({ length: IN_FLIGHT }, (_, i) => get(agent, `${url}/api/fhir/R4/${i % 2 ? 'Observation' : 'Patient'}?_count=200`, headers, signal));
  const all = await Promise.all(outcomes);
  agent.destroy();
  return all;
}

describe('shutdown with requests in flight', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterAll(async () => {
    for (const c of cleanups) await c();
  });

  it(`answers all ${IN_FLIGHT} searches in flight with 200 after SIGTERM, refuses new connections, and exits 0`, { timeout: 300_000 }, async () => {
    const database = await commandDatabase();
    cleanups.push(database.cleanup);
    const server = await serve([], { ...database.env, LOG_LEVEL: 'error', PONT_SHUTDOWN_GRACE: GRACE });
    cleanups.push(async () => void server.child.kill('SIGKILL'));
    const token = await demoToken(server.url);
    const exited = once(server.child, 'exit');
    const outcomes = await searchesThroughSigterm(server.url, token, server.child.pid!);
    expect(outcomes.filter((o) => o !== 200), server.output()).toEqual([]);
    // Then new connections are refused (bounded polling: the listener closes once no connection arrived for 100 ms).
    await eventually(async () => expect(await get(new Agent(), `${server.url}/healthz`, {})).toBe('ECONNREFUSED'), { intervalMs: 20 });
    const [code] = await exited;
    expect(code, server.output()).toBe(0);
  });

  it.runIf(backend === 'postgres')(`does the same in every process of --workers 2`, { timeout: 300_000 }, async () => {
    const database = await commandDatabase();
    cleanups.push(database.cleanup);
    const server = await serve(['--workers', '2'], { ...database.env, LOG_LEVEL: 'error', PONT_SHUTDOWN_GRACE: GRACE });
    cleanups.push(async () => void server.child.kill('SIGKILL'));
    expect(server.output()).toMatch(/2 worker processes/);
    const token = await demoToken(server.url);
    const exited = once(server.child, 'exit');
    const outcomes = await searchesThroughSigterm(server.url, token, server.child.pid!);
    expect(outcomes.filter((o) => o !== 200), server.output()).toEqual([]);
    const [code] = await exited;
    expect(code, server.output()).toBe(0);
  });
});
