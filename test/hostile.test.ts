import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent } from '../src/auth/agents';
import { SCOPES } from '../src/core/scopes';
import { backend, createTestClient, startTestServer, type TestServer } from './harness';

/**
 * The hostile harness: every operation of the published OpenAPI document, called with mutated parameters, bodies
 * and headers (deep nesting, huge incompressible strings, NUL and lone surrogates, wrong types, prototype keys,
 * extreme numbers and dates), 10,000 requests on PostgreSQL (3,000 on PGlite). No answer may be a 5xx, none may
 * be larger than a bounded size, and every one is JSON in the documented shapes.
 */
const REQUESTS = backend === 'postgres' ? 10_000 : 3_000;
const MAX_ANSWER_BYTES = 2 * 1024 * 1024;
const CONCURRENCY = 8;

let pont: TestServer;
let bearer: Record<string, string>;
let agentHeaders: Record<string, string>;
let healthId: string;
let patientId: string;

/** Deterministic pseudo-random numbers (the run is reproducible from its seed). */
function prng(seed: number) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Text that does not compress (PostgreSQL compresses index entries, which would hide size limits). */
function incompressible(n: number): string {
  let text = '';
  for (let i = 0; text.length < n; i++) text += createHash('sha256').update(`h${i}`).digest('base64').replace(/[^A-Za-z]/g, '');
  return text.slice(0, n);
}

const LONG = incompressible(200_000);
const HOSTILE_STRINGS = [
  '', ' ', 'x', LONG, LONG.slice(0, 3000), '\u0000', 'a\u0000b', '\ud800', '😀'.repeat(1000), '%00', '%zz', '../../etc/passwd', "'; DROP TABLE fhir_resources; --",
  '9999-12-31T23:59:59.999-14:00', '0000-01-01', '2026-02-30', '-1', '1e309', 'NaN', 'null', 'true', '[]', '{}', '__proto__', 'constructor',
  'CM000000000000', 'Patient/x', 'https://10.0.0.1/x', 'http://169.254.169.254/', '<script>alert(1)</script>', 'a'.repeat(70), ' lead', 'ge2020', 'eq', 'Patient?name=x',
];
const deep = (n: number): unknown => {
  let v: unknown = 1;
  for (let i = 0; i < n; i++) v = i % 2 ? [v] : { a: v };
  return v;
};
const HOSTILE_VALUES: unknown[] = [
  ...HOSTILE_STRINGS, null, 0, -1, 1.5, 1e308, -1e308, Number.MAX_SAFE_INTEGER + 2, true, false, [], {}, [[]], [null], deep(100), deep(1000),
  { __proto__: { polluted: true } }, JSON.parse('{"__proto__":{"x":1}}'), { constructor: { prototype: {} } }, Array.from({ length: 20_000 }, () => 'x'),
  Object.fromEntries(Array.from({ length: 2000 }, (_, i) => [`k${i}`, i])),
];

interface Operation {
  method: string;
  path: string;
  parameters: Array<{ name: string; in: string }>;
  bodyProperties: string[];
  hasBody: boolean;
  security: string;
}

function operationsOf(doc: any): Operation[] {
  const ops: Operation[] = [];
  for (const [path, item] of Object.entries<any>(doc.paths))
    for (const [method, op] of Object.entries<any>(item)) {
      if (!['get', 'post', 'put', 'delete', 'patch'].includes(method)) continue;
      const content = op.requestBody?.content ?? {};
      const schema = (Object.values(content)[0] as any)?.schema;
      const resolved = schema?.$ref ? doc.components.schemas[schema.$ref.split('/').pop()] : schema;
      ops.push({
        method: method.toUpperCase(),
        path,
        parameters: op.parameters ?? [],
        bodyProperties: Object.keys(resolved?.properties ?? {}),
        hasBody: !!op.requestBody,
        security: JSON.stringify(op.security ?? []),
      });
    }
  return ops;
}

beforeAll(async () => {
  pont = await startTestServer({ PONT_RATE_LIMITS: 'default=999999999/60,fhir=999999999/60' });
  const client = await createTestClient(pont, [...SCOPES], { organizationId: 'org-hostile', facilityId: 'fac-hostile', allPatients: true });
  bearer = client.headers;
  const resolved = await pont.json('/api/v1/connect/patients/resolve', { method: 'POST', headers: bearer, json: { first_name: 'Hostile', last_name: 'Harness', date_of_birth: '1970-01-01' } });
  healthId = resolved.body.health_id;
  patientId = resolved.body.patient?.id ?? (await pont.json(`/api/fhir/R4/Patient?identifier=https://pont.health/fhir/sid/health-id|${healthId}`, { headers: bearer })).body.entry[0].resource.id;
  const agent = await createAgent(pont.services.db, { organizationId: 'org-hostile', facilityId: 'fac-hostile' });
  agentHeaders = { 'x-bridge-agent-id': agent.agent_id, 'x-bridge-agent-key': agent.agent_key, 'x-bridge-timestamp': String(Math.floor(Date.now() / 1000)) };
}, 120_000);
afterAll(async () => {
  await pont?.close();
});

describe('the hostile harness', () => {
  it(`survives ${REQUESTS} mutated requests over every operation: no 5xx, bounded answers, documented shapes`, async () => {
    const doc = (await pont.json('/api/openapi.json')).body;
    // The demo reset seeds five patients per call: a few calls suffice.
    const operations = operationsOf(doc);
    const rnd = prng(20261122);
    const pick = <T>(list: readonly T[]) => list[Math.floor(rnd() * list.length)]!;
    const failures: string[] = [];
    let sent = 0;
    let succeeded = 0;
    let demoResets = 0;
    const sample = (): { method: string; url: string; headers: Record<string, string>; body?: string } => {
      let op = pick(operations);
      while (op.path === '/api/demo/reset' && demoResets >= 3) op = pick(operations);
      if (op.path === '/api/demo/reset') demoResets++;
      const mutate = rnd() < 0.5;
      const valueFor = (name: string) => {
        if (mutate && rnd() < 0.4) return String(pick(HOSTILE_STRINGS));
        if (name === 'health_id') return healthId;
        if (name === 'id') return rnd() < 0.5 ? patientId : 'nope';
        if (name === 'type') return pick(['Patient', 'Observation', 'Condition', 'AuditEvent', 'Consent', 'Nope', 'BiologicallyDerivedProduct']);
        return pick(['x', '1', 'Patient', healthId]);
      };
      let path = op.path.replace(/\{([^}]+)\}/g, (_, name) => encodeURIComponent(valueFor(name).toWellFormed()));
      const query = new URLSearchParams();
      for (const p of op.parameters.filter((p) => p.in === 'query')) if (rnd() < 0.5) query.append(p.name, valueFor(p.name));
      if (mutate && rnd() < 0.3) query.append(pick(['_count', '_sort', 'name', 'date', '_include', '_cursor', 'limit', 'cursor', 'since', 'type']), String(pick(HOSTILE_STRINGS)).slice(0, 2000));
      const qs = query.toString();
      if (qs) path += `?${qs}`;
      const headers: Record<string, string> = op.path.startsWith('/api/v1/bridge') ? { ...agentHeaders } : { ...bearer };
      if (mutate && rnd() < 0.2) headers[pick(['idempotency-key', 'if-match', 'if-none-exist', 'prefer', 'accept', 'x-purpose-of-use', 'if-none-match', 'x-emergency-reason'])] = String(pick(HOSTILE_STRINGS)).replace(/[\u0000-\u001f\u007f-\uffff]/g, '?').slice(0, 4000);
      if (mutate && rnd() < 0.05) delete headers.authorization;
      let body: string | undefined;
      if (op.hasBody) {
        let value: unknown;
        if (op.bodyProperties.length) {
          const obj: Record<string, unknown> = { health_id: healthId, resourceType: 'Patient' };
          for (const name of op.bodyProperties) if (rnd() < 0.6) obj[name] = mutate ? pick(HOSTILE_VALUES) : valueFor(name);
          value = mutate && rnd() < 0.1 ? pick(HOSTILE_VALUES) : obj;
        } else {
          const resource: Record<string, unknown> = { resourceType: pick(['Patient', 'Observation', 'Bundle', 'Condition', 'Nope']), status: 'final', code: { text: 'x' } };
          if (mutate) resource[pick(['name', 'subject', 'text', 'valueString', 'identifier', 'effectiveDateTime', 'contained', 'entry', '__proto__', 'extension'])] = pick(HOSTILE_VALUES);
          value = mutate && rnd() < 0.1 ? pick(HOSTILE_VALUES) : resource;
        }
        body = JSON.stringify(value) ?? 'null';
        if (mutate && rnd() < 0.05) body = body.slice(0, Math.floor(body.length / 2)); // truncated JSON
        if (mutate && rnd() < 0.02) body = '['.repeat(100_000) + ']'.repeat(100_000); // nested deeper than any parser's stack
        headers['content-type'] = rnd() < 0.9 ? (op.path.startsWith('/api/fhir') ? 'application/fhir+json' : 'application/json') : 'application/x-www-form-urlencoded';
        if (headers['content-type'] === 'application/x-www-form-urlencoded') body = `a=${encodeURIComponent(String(pick(HOSTILE_STRINGS)).toWellFormed())}`;
      }
      return { method: op.method, url: path, headers, body };
    };
    const worker = async () => {
      while (sent < REQUESTS) {
        sent++;
        const req = sample();
        const res = await pont.fetch(req.url, { method: req.method, headers: req.headers, body: req.body });
        const bytes = Buffer.from(await res.arrayBuffer());
        if (res.status < 300) succeeded++;
        const problem =
          res.status >= 500 ? `status ${res.status}: ${bytes.toString('utf8').slice(0, 300)}` : bytes.length > MAX_ANSWER_BYTES ? `answer of ${bytes.length} bytes` : undefined;
        const type = res.headers.get('content-type') ?? '';
        const shapeProblem = bytes.length && res.status >= 400 && !/json/.test(type) ? `a ${res.status} answer in ${type}` : undefined;
        if ((problem || shapeProblem) && failures.length < 20) failures.push(`${req.method} ${req.url.slice(0, 200)} -> ${problem ?? shapeProblem}`);
      }
    };
    await Promise.all(Array.from({ length: CONCURRENCY }, worker));
    expect(sent).toBeGreaterThanOrEqual(REQUESTS);
    expect(failures).toEqual([]);
    // The harness reaches the handlers, not only the validation in front of them.
    expect(succeeded).toBeGreaterThan(REQUESTS / 10);
  }, 900_000);
});
