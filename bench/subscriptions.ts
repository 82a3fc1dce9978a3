/**
 * `npm run bench:subscriptions`: FHIR Subscriptions (issue 44), one Pont on a scratch PostgreSQL database, in this process.
 *
 * - latency: BENCH_RATE finished Encounters per second for BENCH_SECONDS, written through POST /api/fhir/R4/Encounter, with
 *   one rest-hook subscription (id-only, to a local endpoint) and one bound websocket subscription to "Encounter finished";
 *   p50/p95 from the write's 201 answer (the commit is before it) to the notification's arrival, for each channel;
 * - cost: the same write, sequentially, with no subscription and then with BENCH_SUBSCRIPTIONS active subscriptions of the
 *   topic (websocket, none bound: the fan-out's numbering and rows only): the added time per write is what a write pays;
 *   the fan-out numbers the queued changes beside the writes (src/subscriptions/fanout.ts), and how long it takes to
 *   catch up after the last write, and its rows per second, are what the subscriptions cost the server.
 * Figures to bench/results/subscriptions-postgres-<rate>per-s-<subscriptions>subs[-BENCH_LABEL].json (BENCH_SUBSCRIPTIONS=0 skips the cost part).
 */
import { writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { WebSocket } from 'ws';
import { createClient } from '../src/auth/clients';
import { loadConfig } from '../src/config';
import type { ClientPrincipal } from '../src/core/principal';
import { startPont } from '../src/server';
import { createScratchDatabase } from '../test/harness';

const RATE = Number(process.env.BENCH_RATE ?? 200);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 5);
const MANY = Number(process.env.BENCH_SUBSCRIPTIONS ?? 1000);
/** How many clients (of the one organisation) own the MANY subscriptions: the fan-out asks the policy once per subscriber. */
const SUBSCRIBERS = Math.max(1, Number(process.env.BENCH_SUBSCRIBERS ?? 1));
const COST_WRITES = Number(process.env.BENCH_COST_WRITES ?? 100);
const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport/StructureDefinition';
const FHIR_JSON = 'application/fhir+json';

const percentile = (values: number[], p: number) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length ? Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]! * 10) / 10 : null;
};
const focusOf = (bundle: any): string | undefined =>
  bundle.entry?.[0]?.resource?.parameter?.find((p: any) => p.name === 'notification-event')?.part?.find((x: any) => x.name === 'focus')?.valueReference?.reference?.split('/').pop();

async function main() {
  const scratch = await createScratchDatabase();
  const config = loadConfig({ DATABASE_URL: scratch.url, PORT: '0', LOG_LEVEL: 'error', PONT_ENV: 'development', PONT_WEBHOOK_POLL_INTERVAL: '1s' });
  const pont = await startPont(config);
  try {
    const made = await createClient(pont.services.db, { name: 'bench', organizationId: 'org-bench', scopes: ['fhir:read', 'fhir:write', 'patients:read'] });
    const token = await (
      await fetch(`${pont.url}/api/v1/connect/auth/token`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ grant_type: 'client_credentials', client_id: made.client_id, client_secret: made.client_secret }) })
    ).json();
    const headers = { authorization: `Bearer ${(token as any).access_token}`, 'content-type': FHIR_JSON };
    const call = async (path: string, init: RequestInit = {}) => {
      const res = await fetch(`${pont.url}/api/fhir/R4${path}`, { ...init, headers });
      const text = await res.text();
      return { status: res.status, body: text ? JSON.parse(text) : undefined };
    };
    const topic = `${pont.url}/api/fhir/R4/SubscriptionTopic/encounter-finished`;
    const subscription = (channel: 'rest-hook' | 'websocket', endpoint?: string) => ({
      resourceType: 'Subscription',
      criteria: topic,
      channel: { type: channel, ...(endpoint && { endpoint }), payload: FHIR_JSON, _payload: { extension: [{ url: `${BACKPORT}/backport-payload-content`, valueCode: 'id-only' }] } },
    });
    const patient = (await call('/Patient', { method: 'POST', body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Bench' }], birthDate: '1980-01-01' }) })).body.id;
    const finish = async () => {
      const res = await call('/Encounter', { method: 'POST', body: JSON.stringify({ resourceType: 'Encounter', status: 'finished', class: { code: 'AMB' }, subject: { reference: `Patient/${patient}` } }) });
      if (res.status !== 201) throw new Error(`write: ${res.status} ${JSON.stringify(res.body)}`);
      return { id: res.body.id as string, at: performance.now() };
    };

    // ---- cost per event: sequential writes with no subscription, then with MANY
    const numbered = async () => Number((await pont.services.db.query<{ n: string }>('SELECT coalesce(sum(cardinality(focus_ids)), 0) AS n FROM fhir_subscription_event_runs')).rows[0]!.n);
    const timeWrites = async () => {
      const started = performance.now();
      for (let i = 0; i < COST_WRITES; i++) await finish();
      const written = performance.now();
      const rowsBefore = await numbered();
      await pont.services.subscriptions.numberQueued(); // the fan-out catches up (the worker, or this call when it is idle)
      const caughtUp = performance.now();
      return { perWrite: (written - started) / COST_WRITES, catchUpMs: caughtUp - written, totalMs: caughtUp - started, rowsAtLastWrite: rowsBefore };
    };
    await timeWrites(); // warm up
    const without = MANY ? await timeWrites() : { perWrite: 0, catchUpMs: 0, totalMs: 0, rowsAtLastWrite: 0 };
    const scopes = ['fhir:read', 'fhir:write', 'patients:read'] as const;
    const principals: ClientPrincipal[] = [{ kind: 'client', clientId: made.client_id, organizationId: 'org-bench', scopes: [...scopes] }];
    for (let i = 1; i < Math.min(SUBSCRIBERS, MANY); i++) {
      const other = await createClient(pont.services.db, { name: `bench ${i}`, organizationId: 'org-bench', scopes: [...scopes] });
      principals.push({ kind: 'client', clientId: other.client_id, organizationId: 'org-bench', scopes: [...scopes] });
    }
    for (let i = 0; i < MANY; i++) await pont.services.subscriptions.create(principals[i % principals.length]!, subscription('websocket'));
    const withMany = MANY ? await timeWrites() : without;
    const rows = await numbered();
    await pont.services.db.query(`UPDATE fhir_subscriptions SET deleted_at = now(), status = 'off'`);

    // ---- latency at RATE/s: one rest-hook, one websocket
    const arrivals = { hook: new Map<string, number>(), socket: new Map<string, number>() };
    const endpoint = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const focus = focusOf(JSON.parse(Buffer.concat(chunks).toString('utf8')));
        if (focus && !arrivals.hook.has(focus)) arrivals.hook.set(focus, performance.now());
        res.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => endpoint.listen(0, '127.0.0.1', () => resolve()));
    const hook = await call('/Subscription', { method: 'POST', body: JSON.stringify(subscription('rest-hook', `http://127.0.0.1:${(endpoint.address() as AddressInfo).port}/hook`)) });
    while ((await call(`/Subscription/${hook.body.id}`)).body.status !== 'active') await new Promise((r) => setTimeout(r, 20));
    const ws = await call('/Subscription', { method: 'POST', body: JSON.stringify(subscription('websocket')) });
    const binding = (await call(`/Subscription/${ws.body.id}/$get-ws-binding-token`)).body.parameter;
    const socket = new WebSocket(binding.find((p: any) => p.name === 'websocket-url').valueUrl);
    await new Promise((resolve) => socket.once('open', resolve));
    let handshake: () => void;
    const handshook = new Promise<void>((resolve) => (handshake = resolve));
    socket.on('message', (data) => {
      const bundle = JSON.parse(data.toString('utf8'));
      const type = bundle.entry?.[0]?.resource?.parameter?.find((p: any) => p.name === 'type')?.valueCode;
      if (type === 'handshake') handshake();
      const focus = focusOf(bundle);
      if (focus && !arrivals.socket.has(focus)) arrivals.socket.set(focus, performance.now());
    });
    socket.send(`bind-with-token: ${binding.find((p: any) => p.name === 'token').valueString}`);
    await handshook;

    const written = new Map<string, number>();
    const total = RATE * SECONDS;
    const began = performance.now();
    const writes: Promise<void>[] = [];
    for (let i = 0; i < total; i++) {
      const due = began + (i * 1000) / RATE;
      const wait = due - performance.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      writes.push(finish().then(({ id, at }) => void written.set(id, at)));
    }
    await Promise.all(writes);
    const writeSeconds = (performance.now() - began) / 1000;
    const deadline = performance.now() + 60_000;
    while ((arrivals.hook.size < total || arrivals.socket.size < total) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    const latencies = (m: Map<string, number>) => [...written].filter(([id]) => m.has(id)).map(([id, at]) => Math.max(0, m.get(id)! - at));
    socket.close();
    endpoint.closeAllConnections();
    endpoint.close();

    const result = {
      date: new Date().toISOString(),
      machine: 'shared 2-core container (4 engineers at work), PostgreSQL 127.0.0.1, Pont in the benchmark process',
      latency: {
        target_rate_per_s: RATE,
        achieved_rate_per_s: Math.round((total / writeSeconds) * 10) / 10,
        events: total,
        rest_hook: { received: arrivals.hook.size, p50_ms: percentile(latencies(arrivals.hook), 50), p95_ms: percentile(latencies(arrivals.hook), 95) },
        websocket: { received: arrivals.socket.size, p50_ms: percentile(latencies(arrivals.socket), 50), p95_ms: percentile(latencies(arrivals.socket), 95) },
        measured_from: "the write's 201 answer (its transaction committed before it)",
      },
      cost: {
        subscriptions: MANY,
        subscribers: principals.length,
        writes: COST_WRITES,
        ms_per_write_without: Math.round(without.perWrite * 100) / 100,
        ms_per_write_with: Math.round(withMany.perWrite * 100) / 100,
        added_ms_per_write: Math.round((withMany.perWrite - without.perWrite) * 100) / 100,
        numbered_rows: rows,
        numbered_rows_at_last_write: withMany.rowsAtLastWrite,
        fanout_catch_up_after_last_write_ms: Math.round(withMany.catchUpMs),
        fanout_rows_per_s: Math.round((rows / withMany.totalMs) * 1000),
        fanout_ms_per_event: Math.round((withMany.totalMs / COST_WRITES) * 100) / 100,
        fanout_note: 'the writes and the fan-out ran side by side: fanout_ms_per_event is their elapsed time per write until every subscription was numbered',
      },
    };
    console.log(JSON.stringify(result, null, 2));
    const label = process.env.BENCH_LABEL ? `-${process.env.BENCH_LABEL}` : '';
    writeFileSync(new URL(`./results/subscriptions-postgres-${RATE}per-s-${MANY}subs${label}.json`, import.meta.url), `${JSON.stringify(result, null, 2)}\n`);
  } finally {
    await pont.close();
    await scratch.drop();
  }
}

await main();
