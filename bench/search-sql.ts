/**
 * What building the SQL of a read costs (`npx tsx bench/search-sql.ts [--out FILE] [--rounds N]`): the store's
 * search and read functions, as `bench/fhir.ts`'s queries call them under the consent rule, against a Queryable that
 * answers at once (one row per page, so includes run too). No database: this is the JavaScript the request spends
 * before and after the statements, which the SQL builder (src/db/sql.ts) changed; the statements' own cost is
 * `bench/fhir.ts`'s floor. CPU microseconds (user + system) per call, the median of the rounds: CPU time, not wall
 * time, so that waiting for a core on a shared machine is not counted; compare two versions run alternately.
 */
import { writeFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import type { Queryable } from '../src/db/database';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { parseSearch, type QueryParams } from '../src/fhir/search/parse';
import { readVersion, searchResources } from '../src/fhir/store';
import { accessPolicyFor } from '../src/policy/index';
import { stats } from './stats';

const { values: opts } = parseArgs({ options: { out: { type: 'string' }, rounds: { type: 'string', default: '15' }, calls: { type: 'string', default: '2000' } } });
const rounds = Number(opts.rounds);
const calls = Number(opts.calls);

loadFhirDefinitions();
const base = 'http://localhost/api/fhir/R4';
const policy = accessPolicyFor({ kind: 'client', clientId: 'bench', organizationId: 'org-bench', scopes: ['fhir:read'] }, 'fhir');

/** Answers every statement at once: a count of 1, else one row (an Encounter with a participant, for `_include`). */
const db: Queryable = {
  async query<T>(text: string) {
    const row = text.includes('count(*)')
      ? { n: 1 }
      : { rid: '1', id: 'x', version_id: '1', last_updated: new Date(0), deleted: false, allowed: true, content: { resourceType: 'Encounter', id: 'x', participant: [{ individual: { reference: 'Practitioner/p' } }] } };
    return { rows: [row as T], rowCount: 1 };
  },
  async exec() {},
};

const search = (type: string, query: QueryParams) => () => searchResources(db, base, parseSearch(type, query, base), query, policy);
const KINDS: Array<[string, () => Promise<unknown>]> = [
  ['read by id', () => readVersion(db, 'Observation', 'x', policy.rowFilter)],
  ['patient + code', search('Observation', { subject: 'Patient/p1', code: 'http://loinc.org|8867-4' })],
  ['patient + date range', search('Observation', { subject: 'Patient/p1', date: ['ge2015-01-01', 'lt2018-01-01'] })],
  ['_include', search('Encounter', { subject: 'Patient/p1', _include: 'Encounter:participant' })],
  ['chain + _has', search('Patient', { 'organization:Organization.name': 'general', '_has:Observation:subject:code': 'http://loinc.org|8867-4' })],
];

const figures: Record<string, { microsecondsPerCall: number; p95: number }> = {};
for (const [name, call] of KINDS) {
  for (let i = 0; i < calls; i++) await call(); // warm-up
  const perCall: number[] = [];
  for (let r = 0; r < rounds; r++) {
    const cpu = process.cpuUsage();
    for (let i = 0; i < calls; i++) await call();
    const used = process.cpuUsage(cpu);
    perCall.push((used.user + used.system) / calls);
  }
  const s = stats(perCall);
  figures[name] = { microsecondsPerCall: Number(s.p50.toFixed(2)), p95: Number(s.p95.toFixed(2)) };
}
const result = { startedAt: new Date().toISOString(), node: process.version, rounds, calls, loadavg: (await import('node:os')).loadavg(), figures };
console.log(JSON.stringify(result));
if (opts.out) writeFileSync(opts.out, JSON.stringify(result, null, 2) + '\n');
