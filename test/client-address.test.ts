/** PONT_TRUST_PROXY: which X-Forwarded-For entry is the caller, as Express's `trust proxy` and nginx's real_ip find it. */
import type { AuditEvent } from '@medplum/fhirtypes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';
import { clientAddress, parseTrustProxy, type ProxyTrust } from '../src/http/client-address';
import { createTestClient, startTestServer, type TestServer } from './harness';

const trust = (text: string) => parseTrustProxy(text) as ProxyTrust;
const SOCKET = '10.0.0.2'; // the proxy in front of Pont

describe('the caller address of a chain', () => {
  it.each([
    // [PONT_TRUST_PROXY, X-Forwarded-For, caller]
    ['false', '6.6.6.6, 198.51.100.7', SOCKET],
    ['0', '6.6.6.6', SOCKET],
    ['false', undefined, SOCKET],
    // One proxy that appends: the rightmost entry is the one it wrote; what the caller sent is to its left.
    ['1', '198.51.100.7', '198.51.100.7'],
    ['1', '6.6.6.6, 198.51.100.7', '198.51.100.7'],
    ['1', '6.6.6.6,7.7.7.7 ,  198.51.100.7', '198.51.100.7'],
    ['1', undefined, SOCKET],
    // `true` (the older form) is one hop, never the leftmost.
    ['true', '6.6.6.6, 198.51.100.7', '198.51.100.7'],
    // Two proxies: the socket's peer and the one before it.
    ['2', '6.6.6.6, 198.51.100.7, 10.0.0.9', '198.51.100.7'],
    // More hops than entries: the leftmost, as Express.
    ['3', '198.51.100.7, 10.0.0.9', '198.51.100.7'],
    // Addresses: skip every trusted proxy from the right, stop at the first other address.
    ['10.0.0.0/8', '6.6.6.6, 198.51.100.7, 10.0.0.9', '198.51.100.7'],
    ['10.0.0.0/8,127.0.0.1', '6.6.6.6, 198.51.100.7, 10.1.2.3, 10.0.0.9', '198.51.100.7'],
    ['10.0.0.2', '6.6.6.6, 198.51.100.7, 10.0.0.9', '10.0.0.9'], // 10.0.0.9 is not one of ours: it is the caller
    ['192.168.0.0/16', '6.6.6.6, 198.51.100.7', SOCKET], // the socket's peer is not a trusted proxy: the header is not believed
    ['uniquelocal', '6.6.6.6, 198.51.100.7, 172.16.4.4', '198.51.100.7'],
    ['10.0.0.0/8', '10.0.0.7, 10.0.0.9', '10.0.0.7'], // every entry trusted: the leftmost
    ['2001:db8::/32,10.0.0.0/8', '2001:db8::1, 2001:db9::5, 2001:db8::2', '2001:db9::5'],
    // Entries that are not addresses are not believed: the hop that passed them on is the caller.
    ['1', '6.6.6.6, not-an-ip', SOCKET],
    ['2', 'x, <script>, 10.0.0.9', '10.0.0.9'],
    ['10.0.0.0/8', 'garbage, 10.0.0.9', '10.0.0.9'],
  ])('PONT_TRUST_PROXY=%s, X-Forwarded-For: %s -> %s', (setting, header, expected) => {
    expect(clientAddress(SOCKET, header, trust(setting))).toBe(expected);
  });

  it('matches IPv4 proxies reported as IPv4-mapped IPv6 by a dual-stack socket', () => {
    expect(clientAddress('::ffff:10.0.0.2', '6.6.6.6, 198.51.100.7', trust('10.0.0.0/8'))).toBe('198.51.100.7');
    expect(clientAddress('::ffff:10.0.0.2', '198.51.100.7', trust('loopback'))).toBe('::ffff:10.0.0.2');
  });

  it('refuses a setting it cannot read, naming the entry', () => {
    for (const bad of ['yes', '10.0.0.0/33', '10.0.0.0/8,proxy.internal', '1000']) expect(typeof parseTrustProxy(bad)).toBe('string');
    expect(() => loadConfig({ PONT_TRUST_PROXY: '10.0.0.0/8,proxy.internal' })).toThrow(/PONT_TRUST_PROXY.*proxy\.internal/s);
    expect(loadConfig({}).trustProxy).toEqual({ kind: 'none' });
    expect(loadConfig({ PONT_TRUST_PROXY: 'true' }).trustProxy).toEqual({ kind: 'hops', hops: 1 });
  });
});

describe('behind one appending proxy (PONT_TRUST_PROXY=1)', () => {
  let pont: TestServer;
  beforeAll(async () => {
    // The default failed-auth limit (100), over a day-long window: a minute's, aligned on the epoch, could end mid-test.
    pont = await startTestServer({ PONT_TRUST_PROXY: '1', PONT_RATE_LIMITS: 'failed-auth=100/86400' });
  });
  afterAll(async () => {
    await pont?.close();
  });

  it('counts failed secrets by the address the proxy saw, whatever the caller puts on the left', async () => {
    const real = '198.51.100.23';
    const statuses: number[] = [];
    for (let i = 0; i < 105; i++) {
      const res = await pont.json('/api/v1/connect/auth/token', {
        method: 'POST',
        headers: { 'x-forwarded-for': `203.0.113.${i}, ${real}` },
        json: { grant_type: 'client_credentials', client_id: 'cli_nobody', client_secret: `wrong-${i}` },
      });
      statuses.push(res.status);
    }
    expect(statuses.slice(0, 100).every((s) => s === 401)).toBe(true);
    expect(statuses.slice(100).every((s) => s === 429)).toBe(true);
    const keys = (await pont.services.db.query<{ key: string }>(`SELECT key FROM rate_counters WHERE key LIKE 'failed-auth:%'`)).rows.map((r) => r.key);
    expect(keys).toEqual([`failed-auth:ip:${real}`]);
    // Another address behind the same proxy is not held back.
    const other = await pont.json('/api/v1/connect/auth/token', {
      method: 'POST',
      headers: { 'x-forwarded-for': '198.51.100.24' },
      json: { grant_type: 'client_credentials', client_id: 'cli_nobody', client_secret: 'wrong' },
    });
    expect(other.status).toBe(401);
  }, 120_000);

  it('writes the address the proxy saw into the audit trail', async () => {
    const client = await createTestClient(pont, ['health_id:verify'], { organizationId: 'org-proxied' });
    const resolved = await pont.json('/api/v1/connect/patients/resolve', {
      method: 'POST',
      headers: { ...client.headers, 'x-forwarded-for': '6.6.6.6, 198.51.100.42' },
      json: { first_name: 'Pro', last_name: 'Xy', date_of_birth: '1990-03-03' },
    });
    expect(resolved.status).toBe(201);
    const auditor = await createTestClient(pont, ['audit:read'], { organizationId: 'org-operator', allPatients: true });
    const { body } = await pont.json(`/api/fhir/R4/AuditEvent?altid=${client.client_id}`, { headers: auditor.headers });
    const events = (body.entry ?? []).map((e: { resource: AuditEvent }) => e.resource) as AuditEvent[];
    expect(events.length).toBeGreaterThan(0);
    for (const event of events) expect(event.agent[0]!.network?.address).toBe('198.51.100.42');
  });
});
