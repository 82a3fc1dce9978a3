/**
 * Access-layer benchmark (`npm run bench:auth -- [options]`), against the running service over HTTP:
 *
 * - tokens issued per second by POST /api/v1/connect/auth/token (each one an Argon2id verification,
 *   a database lookup and an RS256 signature), one client at a time and with `--concurrency` at once;
 * - the time of a refusal for an unknown client and for a wrong secret (they should match);
 * - the latency authentication adds to a FHIR read (GET /api/fhir/R4/Patient/{id}), p50/p95: the same
 *   read on the same services and database, once through the real access layer (Bearer JWT, and the
 *   X-Client-ID/Secret pair) and once through an app whose access layer lets the request through
 *   untouched. Requests alternate between the two, so drift on a busy machine hits both alike.
 *
 *   --backend pglite|postgres|both   (default both)
 *   --tokens N                       token requests per phase (default 200)
 *   --reads N                        FHIR reads per variant (default 1000; the header pair gets N/10)
 *   --concurrency N                  clients of the concurrent token phase (default 4)
 *
 * Figures are printed and written to bench/results/auth-<backend>.json.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { createApp } from '../src/app';
import type { Access } from '../src/auth/access';
import { createClient } from '../src/auth/clients';
import type { ClientPrincipal } from '../src/core/principal';
import { loadConfig } from '../src/config';
import { startPont } from '../src/server';
import { createScratchDatabase } from '../test/harness';
import { runConcurrently, stats, type Stats } from './stats';

type BackendName = 'pglite' | 'postgres';
const resultsDir = resolve(dirname(fileURLToPath(import.meta.url)), 'results');

const { values } = parseArgs({
  args: process.argv.slice(2),
  options: {
    backend: { type: 'string', default: 'both' },
    tokens: { type: 'string', default: '200' },
    reads: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '4' },
  },
});
const backends: BackendName[] = values.backend === 'both' ? ['pglite', 'postgres'] : [values.backend as BackendName];
const TOKENS = Number(values.tokens);
const READS = Number(values.reads);
const CONCURRENCY = Number(values.concurrency);

/** Limits far above what the benchmark sends: it measures the work, not the limiter's refusals. */
const UNLIMITED = ['default', 'fhir', 'token', 'failed-auth'].map((g) => `${g}=100000000/60`).join(',');

async function timed(fn: () => Promise<Response>): Promise<number> {
  const started = performance.now();
  const res = await fn();
  await res.arrayBuffer();
  if (!res.ok) throw new Error(`HTTP ${res.status}`);
  return performance.now() - started;
}

async function listen(app: ReturnType<typeof createApp>): Promise<{ url: string; server: Server }> {
  const server = await new Promise<Server>((done) => {
    const s = app.listen(0, '127.0.0.1', () => done(s));
  });
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

interface Result {
  backend: BackendName;
  tokens: { sequential: Stats & { perSecond: number }; concurrent: Stats & { perSecond: number; concurrency: number } };
  refusals: { unknownClient: Stats; wrongSecret: Stats };
  fhirRead: { unauthenticated: Stats; bearer: Stats; clientSecretHeaders: Stats; addedByBearerP50: number; addedByHeadersP50: number };
}

async function bench(backend: BackendName): Promise<Result> {
  const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
  const config = loadConfig({ PORT: '0', LOG_LEVEL: 'error', PONT_RATE_LIMITS: UNLIMITED, ...(scratch ? { DATABASE_URL: scratch.url } : {}) });
  if (!scratch) config.dataDir = undefined; // PGlite in memory
  const pont = await startPont(config);
  try {
    const client = await createClient(pont.services.db, { name: 'bench', organizationId: 'org-bench', scopes: ['patients:read', 'fhir:write'] });
    const tokenRequest = () =>
      fetch(`${pont.url}/api/v1/connect/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
      });

    await runConcurrently(10, 1, () => timed(tokenRequest)); // warm-up
    const sequential = await runConcurrently(TOKENS, 1, () => timed(tokenRequest));
    const concurrent = await runConcurrently(TOKENS, CONCURRENCY, () => timed(tokenRequest));

    // Unknown client and wrong secret should cost the same (both run one Argon2id verification).
    const refused = (clientId: string, secret: string) => async () => {
      const started = performance.now();
      const res = await fetch(`${pont.url}/api/v1/connect/auth/token`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ grant_type: 'client_credentials', client_id: clientId, client_secret: secret }),
      });
      await res.arrayBuffer();
      if (res.status !== 401) throw new Error(`expected 401, got ${res.status}`);
      return performance.now() - started;
    };
    const unknownClient: number[] = [];
    const wrongSecret: number[] = [];
    for (let i = 0; i < Math.max(20, TOKENS / 4); i++) {
      unknownClient.push(await refused('cli_000000000000000000000000', client.client_secret)());
      wrongSecret.push(await refused(client.client_id, 'pcs_' + 'x'.repeat(43))());
    }

    const token = ((await (await tokenRequest()).json()) as { access_token: string }).access_token;
    const bearer = { authorization: `Bearer ${token}` };
    const created = await fetch(`${pont.url}/api/fhir/R4/Patient`, {
      method: 'POST',
      headers: { ...bearer, 'content-type': 'application/fhir+json' },
      body: JSON.stringify({ resourceType: 'Patient', name: [{ family: 'Mbarga', given: ['Alice'] }], gender: 'female', birthDate: '1984-03-02' }),
    });
    const { id } = (await created.json()) as { id: string };
    const readPath = `/api/fhir/R4/Patient/${id}`;

    // The same routes, services and database, with an access layer that lets every request through.
    const principal: ClientPrincipal = { kind: 'client', clientId: client.client_id, organizationId: 'org-bench', scopes: client.scopes };
    const openAccess = { authorize: async () => principal } as unknown as Access;
    const open = await listen(createApp({ ...pont.services, access: openAccess }));
    try {
      const unauthenticated: number[] = [];
      const withBearer: number[] = [];
      const withHeaders: number[] = [];
      const headerPair = { 'x-client-id': client.client_id, 'x-client-secret': client.client_secret };
      for (let i = 0; i < 50; i++) {
        await timed(() => fetch(open.url + readPath));
        await timed(() => fetch(pont.url + readPath, { headers: bearer }));
      }
      for (let i = 0; i < READS; i++) {
        unauthenticated.push(await timed(() => fetch(open.url + readPath)));
        withBearer.push(await timed(() => fetch(pont.url + readPath, { headers: bearer })));
        if (i % 10 === 0) withHeaders.push(await timed(() => fetch(pont.url + readPath, { headers: headerPair })));
      }
      const base = stats(unauthenticated);
      const viaBearer = stats(withBearer);
      const viaHeaders = stats(withHeaders);
      return {
        backend,
        tokens: {
          sequential: { ...stats(sequential.ms), perSecond: sequential.perSecond },
          concurrent: { ...stats(concurrent.ms), perSecond: concurrent.perSecond, concurrency: CONCURRENCY },
        },
        refusals: { unknownClient: stats(unknownClient), wrongSecret: stats(wrongSecret) },
        fhirRead: {
          unauthenticated: base,
          bearer: viaBearer,
          clientSecretHeaders: viaHeaders,
          addedByBearerP50: viaBearer.p50 - base.p50,
          addedByHeadersP50: viaHeaders.p50 - base.p50,
        },
      };
    } finally {
      await new Promise((done) => open.server.close(done));
    }
  } finally {
    await pont.close();
    await scratch?.drop();
  }
}

const f = (ms: number) => ms.toFixed(2);
for (const backend of backends) {
  const r = await bench(backend);
  mkdirSync(resultsDir, { recursive: true });
  writeFileSync(resolve(resultsDir, `auth-${backend}.json`), JSON.stringify({ at: new Date().toISOString(), ...r }, null, 2) + '\n');
  const t = r.tokens;
  const fr = r.fhirRead;
  console.log(`\n${backend}`);
  console.table({
    'tokens, 1 client': { 'per s': t.sequential.perSecond.toFixed(1), 'p50 ms': f(t.sequential.p50), 'p95 ms': f(t.sequential.p95) },
    [`tokens, ${t.concurrent.concurrency} clients`]: { 'per s': t.concurrent.perSecond.toFixed(1), 'p50 ms': f(t.concurrent.p50), 'p95 ms': f(t.concurrent.p95) },
    'token refused, unknown client': { 'p50 ms': f(r.refusals.unknownClient.p50), 'p95 ms': f(r.refusals.unknownClient.p95) },
    'token refused, wrong secret': { 'p50 ms': f(r.refusals.wrongSecret.p50), 'p95 ms': f(r.refusals.wrongSecret.p95) },
    'FHIR read, no auth': { 'p50 ms': f(fr.unauthenticated.p50), 'p95 ms': f(fr.unauthenticated.p95) },
    'FHIR read, Bearer': { 'p50 ms': f(fr.bearer.p50), 'p95 ms': f(fr.bearer.p95), 'added p50 ms': f(fr.addedByBearerP50) },
    'FHIR read, X-Client-ID/Secret': { 'p50 ms': f(fr.clientSecretHeaders.p50), 'p95 ms': f(fr.clientSecretHeaders.p95), 'added p50 ms': f(fr.addedByHeadersP50) },
  });
}
