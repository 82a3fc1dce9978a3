import { createHash } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import type { PatientLink, Resource } from '@medplum/fhirtypes';
import type { AgentPrincipal } from '../core/principal';
import type { Queryable } from '../db/database';
import { uuidV5 } from '../core/hash';
import { ident, sql as SQL, type Sql } from '../db/sql';
import type { FhirRepository } from '../fhir/repository';
import { HEALTH_ID_SYSTEM } from '../healthid/healthid';
import { ApiError, ErrorCode } from '../core/errors';
import { bridgeBatches, bridgeItems } from '../metrics';

/**
 * `meta.tag` of a resource an agent asks to be created only when the facility has none of that id yet (docs/integrators.md
 * "Bridge Agent protocol"): who a message is about, no update of them (the HL7 agent's ORU patients). Not stored.
 */
const IF_ABSENT_TAG = { system: 'https://pont.health/fhir/CodeSystem/bridge-write', code: 'if-absent' } as const;
const isIfAbsentTag = (tag: { system?: string; code?: string }) => tag.system === IF_ABSENT_TAG.system && tag.code === IF_ABSENT_TAG.code;

/** Where Pont marks what an agent wrote: its facility and the agent (meta.tag). */
export const FACILITY_TAG = 'https://pont.health/fhir/CodeSystem/facility';
export const AGENT_TAG = 'https://pont.health/fhir/CodeSystem/bridge-agent';

export interface SyncItemResult {
  index: number;
  status: 'created' | 'updated' | 'unchanged' | 'failed';
  resource_type: string | null;
  /** Pont's id of the resource (read it at /api/fhir/R4/{resource_type}/{id}); null when it failed without one. */
  id: string | null;
  /** The agent's own id of it, as sent. */
  source_id: string | null;
  error: string | null;
}

export interface SyncAnswer {
  batch_id: string;
  agent_id: string;
  facility_id: string;
  counts: Record<SyncItemResult['status'], number>;
  results: SyncItemResult[];
}

/** Pont's id of an agent's resource: the same for the same facility, type and source id, whichever agent sends it. */
export const syncedId = (facilityId: string, type: string, sourceId: string) => uuidV5('bridge-sync', `${facilityId}\u0000${type}\u0000${sourceId}`);

/**
 * An agent's relative reference, versioned or not. Its version is the agent's system's, which Pont's versions of the
 * synced resource do not follow: translated, it names the resource (left as it was, `Patient/MRN-7/_history/1` named
 * Pont's own Patient/MRN-7, another person's when an app had registered one under that id).
 */
const LOCAL_REFERENCE = /^([A-Z][A-Za-z]+)\/([A-Za-z0-9\-.]{1,64})(?:\/_history\/[A-Za-z0-9\-.]{1,64})?$/;

/**
 * The resource as Pont stores it: its id and every relative reference `Type/id` (versioned too: LOCAL_REFERENCE)
 * translated from the agent's id space to Pont's (syncedId), tagged with the facility and the agent. References to
 * Health IDs or absolute URLs are left alone.
 */
function translate(resource: Resource, agent: AgentPrincipal): Resource {
  const walk = (value: unknown, key?: string): unknown => {
    if (Array.isArray(value)) return value.map((v) => walk(v));
    if (value && typeof value === 'object') {
      const out: Record<string, unknown> = {};
      for (const [k, v] of Object.entries(value)) out[k] = walk(v, k);
      return out;
    }
    if (key === 'reference' && typeof value === 'string') {
      const m = LOCAL_REFERENCE.exec(value);
      if (m) return `${m[1]}/${syncedId(agent.facilityId, m[1]!, m[2]!)}`;
    }
    return value;
  };
  const translated = walk(resource) as Resource;
  const otherTags = (resource.meta?.tag ?? []).filter((t) => t.system !== FACILITY_TAG && t.system !== AGENT_TAG && !isIfAbsentTag(t));
  return {
    ...translated,
    id: syncedId(agent.facilityId, resource.resourceType, resource.id!),
    meta: {
      ...(resource.meta?.profile ? { profile: resource.meta.profile } : {}),
      ...(resource.meta?.security ? { security: resource.meta.security } : {}),
      tag: [...otherTags, { system: FACILITY_TAG, code: agent.facilityId }, { system: AGENT_TAG, code: agent.agentId }],
    },
  } as Resource;
}

/** What makes a batch the same batch again: its resources, and its groups when it has any (the hash before groups were). */
export function batchHash(resources: unknown[], groups: number[][] = []): string {
  const hash = createHash('sha256').update(JSON.stringify(resources));
  return (groups.length ? hash.update(JSON.stringify(groups)) : hash).digest('hex');
}

/**
 * POST /api/v1/bridge/sync (docs/integrators.md "Bridge Agent protocol"): each resource of a batch is written on its own
 * (one failure fails that item only, never half of it) or with its group (`groups`: all of it or none), under Pont's
 * id for the agent's id, so a resend updates instead of duplicating and an identical resend changes nothing. The
 * answer is kept per (agent, batch id): the same batch again gets it back; another batch under a used id is 409.
 */
export async function syncBatch(repo: FhirRepository, agent: AgentPrincipal, batchId: string, resources: unknown[], given: number[][] = []): Promise<{ answer: SyncAnswer; replayed: boolean }> {
  // The same groups, whatever the order they and their indexes are given in (the same batch again).
  const groups = given.map((group) => [...group].sort((a, b) => a - b)).sort((a, b) => a[0]! - b[0]!);
  const hash = batchHash(resources, groups);
  const kept = () => repo.transaction((sql) => storedAnswer(sql, agent.agentId, batchId, hash));
  const stored = await kept();
  if (stored) {
    bridgeBatches.inc({ outcome: 'replayed' });
    return { answer: stored, replayed: true };
  }

  const items = resources.map((item, index) => prepare(agent, index, item));
  // Fast path: the whole batch in one transaction. Any item refused: each unit (a group, or an item in none) on its
  // own, so that only it fails.
  let results = await writeTogether(repo, items).catch((err: unknown) => {
    if (err instanceof ApiError && err.status < 500) return undefined;
    throw err;
  });
  if (!results) {
    results = [];
    for (const unit of unitsOf(items, groups)) for (const r of await writeUnit(repo, unit)) results[r.index] = r;
  }
  await moveMergedReferences(repo, items, results);
  const counts = { created: 0, updated: 0, unchanged: 0, failed: 0 };
  for (const r of results) counts[r.status]++;
  bridgeBatches.inc({ outcome: 'written' });
  for (const [status, n] of Object.entries(counts)) if (n) bridgeItems.inc({ status }, n);
  const answer: SyncAnswer = { batch_id: batchId, agent_id: agent.agentId, facility_id: agent.facilityId, counts, results };

  await repo.transaction(async (tx) => {
    const { rowCount } = await tx.query(
      'INSERT INTO bridge_batches (agent_id, batch_id, content_hash, answer) VALUES ($1, $2, $3, $4) ON CONFLICT (agent_id, batch_id) DO NOTHING',
      [agent.agentId, batchId, hash, JSON.stringify(answer)],
    );
    // The same batch sent twice at once: the items were written once (same ids); the first answer stands.
    if (!rowCount) return;
    if (counts.failed)
      await repo.recordEvent({
        type: 'bridge_agent.sync_failed',
        data: {
          agent_id: agent.agentId,
          facility_id: agent.facilityId,
          batch_id: batchId,
          counts,
          first_errors: results.filter((r) => r.status === 'failed').slice(0, 5).map((r) => ({ index: r.index, resource_type: r.resource_type, error: r.error })),
        },
      });
  });
  const again = await kept();
  return { answer: again ?? answer, replayed: false };
}

async function storedAnswer(sql: Queryable, agentId: string, batchId: string, hash: string): Promise<SyncAnswer | undefined> {
  const { rows } = await sql.query<{ content_hash: string; answer: SyncAnswer }>('SELECT content_hash, answer FROM bridge_batches WHERE agent_id = $1 AND batch_id = $2', [agentId, batchId]);
  const row = rows[0];
  if (!row) return undefined;
  if (row.content_hash !== hash) throw new ApiError(409, ErrorCode.conflict, `Batch ${batchId} was already received with other content: send new content under a new batch_id`);
  return row.answer;
}

interface PreparedItem {
  index: number;
  type: string | null;
  sourceId: string | null;
  /** Created only if absent (IF_ABSENT_TAG): an existing one is left as it is. */
  ifAbsent?: boolean;
  /** The resource as Pont stores it; undefined when the item cannot be written at all. */
  stored?: Resource;
  problem?: string;
}

function prepare(agent: AgentPrincipal, index: number, item: unknown): PreparedItem {
  const resource = item as Resource;
  const type = item && typeof item === 'object' && !Array.isArray(item) && typeof resource.resourceType === 'string' ? resource.resourceType : null;
  const sourceId = type && typeof resource.id === 'string' ? resource.id : null;
  if (!type) return { index, type, sourceId, problem: 'not a FHIR resource (a JSON object with resourceType)' };
  if (!sourceId || !LOCAL_REFERENCE.test(`${type}/${sourceId}`)) return { index, type, sourceId, problem: 'id is required: the id of the resource in the facility system (1-64 of A-Z a-z 0-9 - .)' };
  return { index, type, sourceId, stored: translate(resource, agent), ...((resource.meta?.tag ?? []).some(isIfAbsentTag) && { ifAbsent: true }) };
}

const result = (item: PreparedItem, status: SyncItemResult['status'], error: string | null = null): SyncItemResult => ({
  index: item.index,
  status,
  resource_type: item.type,
  id: item.stored?.id ?? null,
  source_id: item.sourceId,
  error,
});

/** The stored version without what Pont adds or manages: its version, and a Patient's Health ID. */
function comparable(resource: Resource): unknown {
  const { versionId: _v, lastUpdated: _l, ...meta } = resource.meta ?? {};
  const out: Record<string, unknown> = { ...resource, meta };
  if (resource.resourceType === 'Patient') {
    const identifier = (resource.identifier ?? []).filter((i) => i.system !== HEALTH_ID_SYSTEM);
    if (identifier.length) out.identifier = identifier;
    else delete out.identifier;
  }
  return JSON.parse(JSON.stringify(out));
}

/**
 * A Patient as an agent sends it again, with the merge links Pont holds kept (`replaces`, `replaced-by`): a facility's
 * system sends a patient's demographics, never the merges they went through (an HL7 A08 of a survivor has no MRG,
 * a second A40 names only the record it merges now), so a link the agent does not send is not one it removed.
 */
function withMergeLinks(before: Resource | undefined, stored: Resource): Resource {
  if (before?.resourceType !== 'Patient' || stored.resourceType !== 'Patient' || !before.link?.length) return stored;
  const same = (a: PatientLink, b: PatientLink) => a.type === b.type && a.other?.reference === b.other?.reference;
  // A merge the other way round (an A40 of Y into X after one of X into Y) ends the earlier one: X no longer
  // `replaced-by` Y, Y no longer `replaces` X (else each record is replaced by the other, and neither is the patient).
  const reversed = (a: PatientLink, b: PatientLink) => a.other?.reference === b.other?.reference && a.type !== b.type;
  const kept = before.link.filter((l) => (l.type === 'replaces' || l.type === 'replaced-by') && !stored.link?.some((n) => same(l, n) || reversed(l, n)));
  if (!kept.length) return stored;
  // A record merged away stays inactive when its demographics are sent again (an A08 under its old number).
  const stillMerged = before.active === false && stored.active === undefined && kept.some((l) => l.type === 'replaced-by');
  return { ...stored, ...(stillMerged && { active: false }), link: [...kept, ...(stored.link ?? [])] };
}

/**
 * Every item in one transaction (one write for all that changed); throws the first refusal. A resource given again
 * as it was (the patient of each HL7 message, each its group) is written once: its repeats are `unchanged`.
 */
async function writeTogether(repo: FhirRepository, given: PreparedItem[]): Promise<SyncItemResult[] | undefined> {
  // A failed item, or the same resource twice with other content (in order, one by one): not together.
  if (given.some((i) => !i.stored)) return undefined;
  const first = new Map<string, PreparedItem>();
  const repeats = new Set<PreparedItem>();
  for (const item of given) {
    const key = `${item.type}/${item.stored!.id}`;
    const earlier = first.get(key);
    if (!earlier) first.set(key, item);
    else if (earlier.ifAbsent === item.ifAbsent && isDeepStrictEqual(earlier.stored, item.stored)) repeats.add(item);
    else return undefined;
  }
  const items = repeats.size ? given.filter((item) => !repeats.has(item)) : given;
  const written = await repo.transaction(async (sql) => {
    const stored = items.map((i) => i.stored!);
    // Only what the agent's organisation owns is compared: another organisation's resource is never read here
    // (the write below is then refused by the policy as if it did not exist).
    const owned = repo.access.ownerFilter?.(ident('r'));
    const { text, values } = SQL`SELECT r.resource_type, r.id, r.content FROM unnest(${stored.map((r) => r.resourceType)}::text[], ${stored.map((r) => r.id!)}::text[]) AS k(t, i)
       JOIN fhir_resources r ON r.resource_type = k.t AND r.id = k.i AND NOT r.deleted${owned ? SQL` AND ${owned}` : SQL``}`.render();
    const { rows } = await sql.query<{ resource_type: string; id: string; content: Resource }>(text, values);
    const current = new Map(rows.map((r) => [`${r.resource_type}/${r.id}`, r.content]));
    for (const item of items) item.stored = withMergeLinks(current.get(`${item.type}/${item.stored!.id}`), item.stored!);
    await keepVisitsPatients(sql, items, current, owned);
    const status = items.map((item): SyncItemResult['status'] => {
      const before = current.get(`${item.type}/${item.stored!.id}`);
      if (!before) return 'created';
      if (item.ifAbsent) return 'unchanged';
      return isDeepStrictEqual(comparable(before), comparable(item.stored!)) ? 'unchanged' : 'updated';
    });
    const changed = items.filter((_, n) => status[n] !== 'unchanged');
    if (changed.length) await repo.writeItems(changed.map((i) => ({ resource: i.stored!, method: 'PUT' as const, label: `resources[${i.index}]` })), 'bridgeSync');
    return items.map((item, n) => result(item, status[n]!));
  });
  if (!repeats.size) return written;
  const byIndex = new Map(written.map((r) => [r.index, r]));
  return given.map((item) => byIndex.get(item.index) ?? result(item, 'unchanged'));
}

/**
 * A visit is its patient's: an Encounter an agent gives again with another subject (an HL7 A02, A03, A11 naming by its
 * visit number, PV1-19, the visit of another patient) would move it to that patient, and with it what happened in it
 * (the first patient's results would name another patient's visit). Only a merge moves a visit: given under the
 * survivor of the record it is filed under, it moves (as the merge moves it); given under a record merged into the
 * survivor that holds it (a late message under the old number), it stays the survivor's. Anything else is refused,
 * naming the visit, so that the message is written not at all.
 */
async function keepVisitsPatients(sql: Queryable, items: PreparedItem[], current: Map<string, Resource>, owned: Sql | undefined): Promise<void> {
  const subjectOf = (r: Resource | undefined) => (r as { subject?: { reference?: string } } | undefined)?.subject;
  const subject = (r: Resource | undefined) => subjectOf(r)?.reference;
  // Each visit given with another subject than the one stored, with the subject it had (as stored).
  const moved = items.flatMap((item) => {
    const had = item.type === 'Encounter' && !item.ifAbsent ? subjectOf(current.get(`Encounter/${item.stored!.id}`)) : undefined;
    const was = had?.reference;
    return was && was !== subject(item.stored) ? [{ item, had, was }] : [];
  });
  if (!moved.length) return;
  const ids = moved.flatMap(({ item, was }) => [was, subject(item.stored)]).flatMap((r) => /^Patient\/(.+)$/.exec(r ?? '')?.[1] ?? []);
  // As the batch's own resources are read (writeTogether): only the organisation's.
  const { text, values } = SQL`SELECT r.id, r.content FROM fhir_resources r
     WHERE r.resource_type = 'Patient' AND r.id = ANY(${ids}::text[]) AND NOT r.deleted${owned ? SQL` AND ${owned}` : SQL``}`.render();
  const { rows } = await sql.query<{ id: string; content: Resource }>(text, values);
  const links = new Map(rows.map((r) => [`Patient/${r.id}`, (r.content as { link?: PatientLink[] }).link ?? []]));
  const replacedBy = (patient: string, by: string) => (links.get(patient) ?? []).some((l) => l.type === 'replaced-by' && l.other?.reference === by);
  for (const { item, had, was } of moved) {
    const now = subject(item.stored) ?? '(none)';
    if (replacedBy(was, now)) continue;
    if (replacedBy(now, was)) {
      item.stored = { ...item.stored!, subject: had } as Resource;
      continue;
    }
    throw new ApiError(400, ErrorCode.badRequest, `resources[${item.index}]: Encounter ${item.sourceId} is the visit of another patient (${was}), not of ${now}: a visit's patient is not changed by an update of it (a merge moves it)`);
  }
}

/**
 * The batch's units of writing, in batch order: each group (a run of consecutive resources, sorted: a result before
 * its correction), and each resource in none.
 */
function unitsOf(items: PreparedItem[], groups: number[][]): PreparedItem[][] {
  const groupOf = new Map<number, number[]>();
  for (const group of groups) for (const index of group) groupOf.set(index, group);
  const placed = new Set<number>();
  const units: PreparedItem[][] = [];
  for (const item of items) {
    if (placed.has(item.index)) continue;
    const unit = (groupOf.get(item.index) ?? [item.index]).map((index) => items[index]!);
    for (const member of unit) placed.add(member.index);
    units.push(unit);
  }
  return units;
}

/** A unit (a group, or one resource) in one transaction: it is written whole or not at all. */
async function writeUnit(repo: FhirRepository, unit: PreparedItem[]): Promise<SyncItemResult[]> {
  const refusedWith = (error: string, culprit?: PreparedItem) =>
    unit.map((item) => result(item, 'failed', unit.length === 1 || item === culprit ? error : `not written with its group: ${culprit ? `resources[${culprit.index}]` : 'the group'} was refused: ${error}`));
  const unprepared = unit.find((item) => !item.stored);
  if (unprepared) return refusedWith(unprepared.problem!, unprepared);
  try {
    return await repo.transaction(async () => {
      const together = await writeTogether(repo, unit);
      if (together) return together;
      // The same resource twice (a result and its correction): one after the other, in the group's transaction.
      const out: SyncItemResult[] = [];
      for (const item of unit) out.push(...(await writeTogether(repo, [item]))!);
      return out;
    });
  } catch (err) {
    // The write names the resource it refused (`resources[i]: …`, its label).
    const culprit = err instanceof ApiError ? unit.find((item) => err.message.startsWith(`resources[${item.index}]`)) : undefined;
    if (err instanceof ApiError && err.status < 500) return refusedWith(err.message, culprit);
    throw err;
  }
}

/**
 * A merge (HL7 v2 ADT^A40, or any agent's Patient that `replaces` another, as FHIR's Patient.link says): what refers
 * to the record merged away now refers to the survivor. Only the agent's organisation's resources are read and
 * rewritten (the owner filter and the write's policy), each in its own write; one refused stays as it was.
 */
async function moveMergedReferences(repo: FhirRepository, items: PreparedItem[], results: SyncItemResult[]): Promise<void> {
  for (const item of items) {
    const patient = item.stored;
    if (patient?.resourceType !== 'Patient' || results[item.index]?.status === 'failed') continue;
    for (const link of patient.link ?? []) {
      const merged = link.type === 'replaces' ? /^Patient\/([A-Za-z0-9\-.]{1,64})$/.exec(link.other?.reference ?? '')?.[1] : undefined;
      if (!merged || merged === patient.id) continue;
      const owned = repo.access.ownerFilter?.(ident('r'));
      const { text, values } = SQL`SELECT r.content FROM fhir_resources r
        WHERE ${merged} = ANY(r.patients) AND r.resource_type <> 'Patient' AND NOT r.deleted${owned ? SQL` AND ${owned}` : SQL``}`.render();
      const { rows: found } = await repo.transaction((sql) => sql.query<{ content: Resource }>(text, values));
      // The visits first: a result moved before its Encounter would name another patient's visit (the merged
      // record's), which the write refuses, and stay behind.
      const rows = [...found.filter((r) => r.content.resourceType === 'Encounter'), ...found.filter((r) => r.content.resourceType !== 'Encounter')];
      const from = `Patient/${merged}`;
      const to = `Patient/${patient.id}`;
      for (const { content } of rows) {
        const moved = JSON.parse(JSON.stringify(content, (key, value) => (key === 'reference' && value === from ? to : value))) as Resource;
        try {
          await repo.transaction(() => repo.writeItems([{ resource: moved, method: 'PUT', label: `${content.resourceType}/${content.id}` }], 'bridgeSync'));
        } catch (err) {
          if (!(err instanceof ApiError && err.status < 500)) throw err;
        }
      }
    }
  }
}
