import { AsyncLocalStorage } from 'node:async_hooks';
import { randomUUID } from 'node:crypto';
import type { Bundle, Patient, Resource } from '@medplum/fhirtypes';
import type { Principal } from '../core/principal';
import { recordAudit, type AuditAction, type AuditCaller, type AuditRecord } from '../audit/audit';
import type { AuditTrail } from './audit-trail';
import { accessRefusals } from '../metrics';
import type { Environment } from '../config';
import { readerOf, type Database, type Queryable } from '../db/database';
import { primaryPosition, replicaAt } from '../db/replica';
import { recordEvents, resourcesChanged, type NewEvent } from '../events/outbox';
import { eventsOf, patientIdsOf, type ResourceChange } from '../events/rules';
import type { EventType } from '../events/types';
import { healthIdsByPatient, updateMatchKey, withHealthId, type Registered } from '../healthid/registry';
import { ApiError, ErrorCode, badRequest, clipped } from '../core/errors';
import { accessPolicyFor, directoryRows, EMERGENCY_WINDOW_HOURS, rowsOfTypes, UNPLACED_PATIENT, type AccessPolicy, type Channel } from '../policy/index';
import { DATA_CLASSES, dataClassOf } from '../core/data-classes';
import { isResourceType } from '../core/fhir-definitions';
import { and, ident, or, paddedRows, rowsOf, sql as SQL, type Sql } from '../db/sql';
import type { ReadLimits } from '../policy/read-limits';
import { filterSql } from './search/sql';
import { applyResourcePatch, type Patch } from './patch';
import { validateFhirResource } from './validate';
import { accessPatients, CONDITIONAL_REFERENCE, linksOf, patientsOf, unplacedReason } from './compartment';
import { referenceTarget } from './indexer';
import { filedPatients, withFiledPatients } from './store/filed';
import { hashKey } from '../core/hash';
import { isResultParameter, namesPatient, parseSearch, type ParsedSearch, type QueryParams } from './search/parse';
import { everythingBundle, historyBundle, missing, readOneVersion, readReferenced, readVersion, readVersions, type EverythingParams, type FoundVersion } from './store/history';
import { checkSearchReach, pagesStatement, readPages, searchResources, type SearchOptions } from './store/search';
import type { PageShapes, PatientSearch } from './store/page-shapes';
import { bundleJson } from './store/stored-json';
import { checkType, versionTag, type RowFilter } from './store/types';
import { writeMany, type WriteItem, type WriteResult } from './store/writes';
import type { TerminologyLookup } from './term/lookup';

/** Who is asking, and why: what a repository is built from, once per request. */
/** What a feature's read of its derived tables gets from the repository (FhirRepository.readFacility). */
export interface FacilityReader {
  /** The primary database. */
  sql: Queryable;
  /** The replica when one is configured, for reports that tolerate its lag (docs/operators.md "Read replicas"). */
  lagTolerantSql: Queryable;
  /** The clock of answers "as of now" (FhirService.now), in ms since the epoch. */
  now: number;
  /** The caller's access (src/policy). */
  access: AccessPolicy;
}

export interface RequestContext {
  principal: Principal;
  /** Where the request came in (FHIR clients are held to the FHIR scope table). */
  channel: Channel;
  requestId?: string;
  /** Network address of the caller. */
  address?: string;
  /** The route's operationId, named in the audit trail. */
  operation?: string;
  /** The caller's stated purpose of use (X-Purpose-Of-Use, or a route's `purpose`). */
  purpose?: string;
  /** The caller's own reference for the patient (Connect `external_reference`). */
  externalReference?: string;
  /** Break-glass: the reason stated with X-Emergency-Reason. */
  emergencyReason?: string;
}

/** One page of a bulk export (FhirRepository.exportPageQuery). */
export interface ExportPage {
  afterRid: string;
  limit: number;
  /** The export's transactionTime: nothing changed after it. */
  until: string;
  since?: string;
  /** Patient and Group exports: data of any patient ('any'), or of these patients. */
  patients?: 'any' | string[];
  /** `_typeFilter` criteria of this type (OR-ed); none: every resource. */
  typeFilters: QueryParams[];
}

/** What every repository of a process shares. */
export interface RepositoryDeps {
  db: Database;
  /** The audit trail of the process: reads append to its group commits, writes record in their transaction. */
  auditTrail: AuditTrail;
  /** This server's FHIR base URL: references to it are local; fullUrls start with it. */
  baseUrl(): string;
  environment: Environment;
  /** The match key of a Patient's demographics (src/healthid/matching.ts), or null when it has none. */
  matchKeyOf(patient: Patient): string | null;
  /** A resource read through the map of that name (its Connect fields), for the events' data (src/events/rules.ts). */
  readAs(map: string, resource: Resource, fields: ReadonlySet<string>): Record<string, unknown>;
  /**
   * Tables derived from resources of one type (the consent index, inventories...), kept in step by every
   * write, in its transaction, whatever path made it.
   */
  derived: DerivedTable[];
  /** The organisation a resource is recorded as written by, when it is not the writer's (a Consent: the grantee). */
  authorOf?(resource: Resource): string | null | undefined;
  /** The clock (ms since the epoch) of answers "as of now" (the blood-bank inventory): FhirService.now. */
  now(): number;
  /** Which organisations' reads are counted (consents that limit how often): src/policy/read-limits.ts. */
  readLimits: ReadLimits;
  /** The writes' check of required bindings to loaded value sets (src/fhir/term/lookup.ts); absent: none. */
  bindings?: Pick<TerminologyLookup, 'refusals'>;
  /** The statements of searchPages kept by shape (src/fhir/store/page-shapes.ts). */
  pageShapes: PageShapes;
}

/** A table that follows the resources of one type (architecture §9: "registry tables follow the FHIR resources"). */
export interface DerivedTable {
  resourceType: string;
  /** Brings the table in step with these writes (creates, updates and deletes of `resourceType`). */
  sync(sql: Queryable, changes: WriteResult[]): Promise<void>;
  /**
   * Forgets every row of these resources of `resourceType` (by id): they are being removed from the store outright
   * (purgeResources: the demo reset, retention), not deleted through a write, so `sync` never hears of it.
   */
  purge(sql: Queryable, ids: string[]): Promise<void>;
  /** For facility data: the facility a resource belongs to (undefined: not this table's data), for the write policy. */
  facilityOf?(resource: Resource): string | null | undefined;
}

export interface WriteOutcome<T extends Resource = Resource> {
  resource: T;
  /** True when the write created the resource (201), false when it updated it or found it (200). */
  created: boolean;
}

export interface ReadOptions {
  /**
   * False when the caller records its own, more telling audit record in the same transaction (a
   * Connect operation); every other read or write is audited here.
   */
  audit?: boolean;
  /**
   * An identity look-up (Connect resolve and verify): the Patient itself, without the consent rule, so that
   * a facility can find the patient before any consent exists. Only for `read` of a Patient.
   */
  identity?: boolean;
}

export interface WriteOptions extends ReadOptions {
  /**
   * Check the references of the written resources later, all at once (`pont import`: files may refer
   * to each other in any order). Every other write checks them in its transaction.
   */
  deferReferenceCheck?: boolean;
}

/** A repository's open transaction, and the refusals to audit once it ends (committed or not). */
interface OpenTransaction {
  owner: FhirRepository;
  sql: Queryable;
  refusals: AuditRecord[];
}

/**
 * One AsyncLocalStorage for every repository (each names its owner): an AsyncLocalStorage per request would
 * stay enabled for the life of the process, and Node copies every enabled one into each new promise: the
 * cost of every await grew with the number of requests served.
 */
const openTransactions = new AsyncLocalStorage<OpenTransaction>();

/**
 * Types Pont manages, and the channels that may write them: the audit trail is Pont's alone; consents are
 * given through the consent routes (an organisation with fhir:write must not grant itself access).
 */
const MANAGED_TYPES: Record<string, Channel[]> = { AuditEvent: ['system'], Consent: ['connect', 'sdk', 'mobile', 'system'] };

/**
 * The one door to clinical data (architecture §9). Built per request from its RequestContext; every
 * FHIR interaction of every route (FHIR, Connect, SDK, Bridge), of `pont import` and of the demo goes
 * through it. Each call applies the caller's access policy, writes the audit record, records the events
 * of the changes it makes and runs in a transaction: a write, its events and its audit record commit
 * together. `transaction()` composes several calls into one transaction; calls made inside it (and
 * nested `transaction()` calls) join it.
 */

export class FhirRepository {
  readonly access: AccessPolicy;
  /** The patient this request's break-glass names (a request opens emergency access on one patient only). */
  private emergencyPatient?: string;
  /** Its window, once opened (emergencyFor). */
  private emergencyOpened?: Promise<void>;

  constructor(
    private readonly deps: RepositoryDeps,
    readonly context: RequestContext,
  ) {
    // An organisation this process knows holds no consent limiting its reads: they are not counted (no statement),
    // and the policy uses only grants without a frequency, so a limit granted since in another process, not heard of
    // yet, opens nothing uncounted; one it knows holds no consent naming kinds of record or a period is read under
    // plain grants only, the shorter rule, and such a consent granted elsewhere opens nothing until heard of
    // (src/policy/read-limits.ts).
    const principal = context.principal;
    const org = principal.kind === 'client' || principal.kind === 'bridge-agent' || principal.kind === 'portal-user' ? principal.organizationId : undefined;
    const kinds = org ? deps.readLimits.known(org) : undefined;
    const inputs = [principal, context.channel, context.emergencyReason, context.purpose, kinds?.limited !== false, kinds?.scoped !== false] as const;
    this.access = accessPolicyFor(...inputs);
    // accessPolicyFor is a function of these alone: the same inputs, the same policy (and SQL of it).
    this.policyKey = () => JSON.stringify([...inputs, this.baseUrl]);
  }

  /** Every input of the caller's policy, and the FHIR base searches read references under, as text (PageShapes' key). */
  private readonly policyKey: () => string;

  get baseUrl(): string {
    return this.deps.baseUrl();
  }

  // ------------------------------------------------------------------ transactions

  /**
   * Runs `fn` in one transaction (joining the one already open for this repository). `sql` reaches
   * Pont's own tables (Health ID registry, consents index, idempotency records) in that transaction.
   */
  async transaction<T>(fn: (sql: Queryable) => Promise<T>): Promise<T> {
    const open = this.openTransaction;
    if (open) return fn(open.sql);
    const refusals: AuditRecord[] = [];
    try {
      return await this.deps.db.transaction((tx) => {
        refusals.length = 0; // a run that lost to a concurrent transaction is run again (retryContention): its refusals with it
        return openTransactions.run({ owner: this, sql: tx, refusals }, () => fn(tx));
      });
    } finally {
      // A refusal usually ends its transaction with an error: its audit record is written after, on its own.
      await Promise.all(refusals.map((r) => this.deps.auditTrail.append(r)));
    }
  }

  /**
   * A composed read (several statements, nothing written but its audit record): `fn` runs on the open transaction if
   * there is one, else statement by statement on the database, with no transaction to begin and commit, and its audit
   * record goes to the next group commit. Each statement applies the access rule itself, so one that sees a newer
   * state than the one before it shows nothing the caller may not see.
   */
  async reading<T>(fn: (sql: Queryable) => Promise<T>): Promise<T> {
    return fn(this.sql);
  }

  /** This repository's open transaction in the current async context, if any. */
  private get openTransaction(): OpenTransaction | undefined {
    const open = openTransactions.getStore();
    return open?.owner === this ? open : undefined;
  }

  /** The open transaction, or the database itself for a read outside one. */
  private get sql(): Queryable {
    return this.openTransaction?.sql ?? this.deps.db;
  }

  /**
   * For the reads whose answer may be seconds old (docs/operators.md "Read replicas"): the open transaction (it must see its
   * own writes), else the replica. The caller's token and scopes were checked on the primary already.
   */
  private get lagTolerantSql(): Queryable {
    return this.openTransaction?.sql ?? readerOf(this.deps.db);
  }

  /**
   * For the reads that must answer as the primary does now (docs/operators.md "Read replicas"): the open transaction, else the
   * replica if it has replayed everything committed so far, else the primary.
   */
  private async currentSql(): Promise<Queryable> {
    const open = this.openTransaction;
    if (open) return open.sql;
    return (await replicaAt(this.deps.db, await primaryPosition(this.deps.db))) ?? this.deps.db;
  }

  // ------------------------------------------------------------------ reads

  /** The current version; 404 when it never existed, 410 when deleted, 403 when the caller may not see it. */
  async read<T extends Resource>(type: string, id: string, options: ReadOptions = {}): Promise<T> {
    await this.checkReadable(type);
    const identity = options.identity === true && type === 'Patient';
    if (!identity) await this.emergencyFor(() => this.patientsOfResource(type, id));
    const found = await readVersion<T>(this.sql, type, id, identity ? undefined : this.access.rowFilter);
    if (found && !found.allowed) throw await this.refuse('read', type, id);
    const absent = missing(type, id, found);
    if (absent) throw absent;
    return this.shown('read', found!.content!, options);
  }

  /**
   * The resource when the caller may read it (its scopes and the access rule), else undefined: neither refused nor
   * audited, as it is context a translation may use, never shown (a Patient's sex picks a lab result's reference range).
   */
  async readIfAllowed<T extends Resource>(type: string, id: string): Promise<T | undefined> {
    checkType(type);
    if (!this.access.canRead(type)) return undefined;
    const found = await readVersion<T>(this.sql, type, id, this.access.rowFilter);
    return found?.allowed && !found.deleted && found.content ? found.content : undefined;
  }

  /**
   * The stored resources these references (`Type/id`) point to, as far as the caller may read them, in one query:
   * one about a patient under the caller's scopes and the access rule (consent, authorship), one about no patient (a
   * practitioner, an organisation, a location, a medication: directory data) for any caller, as the context of a
   * record it may read. Absent when not readable; neither refused nor audited here: the records layer translates
   * them into the records it shows, and audits those. `patient`: the one the records are of (the access rule's hint).
   */
  async resolveReferences(refs: string[], patient?: string): Promise<Map<string, Resource>> {
    const typeOf = (ref: string) => ref.slice(0, ref.indexOf('/'));
    const valid = refs.filter((ref) => isResourceType(typeOf(ref)));
    const readable = [...new Set(valid.map(typeOf))].filter((t) => this.access.canRead(t));
    return readReferenced(this.sql, valid, (r) =>
      or(directoryRows(r), readable.length ? and(SQL`${r}.resource_type = ANY(${readable}::text[])`, rowsOfTypes(this.access.rowFilter, r, readable, patient)) : undefined),
    );
  }

  /** One version (current or earlier). */
  async vread<T extends Resource>(type: string, id: string, versionId: string, options: ReadOptions = {}): Promise<T> {
    await this.checkReadable(type);
    await this.emergencyFor(() => this.patientsOfResource(type, id));
    const found = await readOneVersion<T>(this.sql, type, id, versionId, this.access.rowFilter);
    if (found && !found.allowed) throw await this.refuse('vread', type, id, versionId);
    const absent = missing(type, id, found, versionId);
    if (absent) throw absent;
    return this.shown('vread', found!.content!, options);
  }

  /**
   * Versions of many resources (`refs`), in one statement, each judged as `vread` judges it: the caller's scopes for its
   * type, the access rule on that version's patients (`allowed`), a deletion or an unknown version absent. Neither refused
   * nor audited here, and no break-glass (a request's): the FHIR Subscriptions' notifications read a batch of events' focus
   * resources so, once for every subscriber of the same policy, and audit what each was shown with `auditVersionsRead`.
   */
  async readVersions(refs: Array<{ type: string; id: string; versionId: string }>): Promise<FoundVersion[]> {
    const readable = refs.filter((r) => isResourceType(r.type) && r.type !== 'AuditEvent' && this.access.canRead(r.type));
    return readVersions(this.sql, readable, this.access.rowFilter);
  }

  /**
   * The audit of versions this caller was shown (`shown`, allowed by readVersions) and refused (`refused`) in one batch:
   * one record of the reads naming their patients (the frequency of a consent that limits reads counted as for any read)
   * and one of the refusals, as a read and a refused read are audited. When the caller's organisation holds a consent
   * that limits how often it reads, each patient's resources are counted and audited apart, so a spent frequency (the
   * 429 of a read) withholds only that patient's: the shown versions withheld so are returned.
   */
  async auditVersionsRead(shown: FoundVersion[], refused: FoundVersion[], operation: string): Promise<Set<FoundVersion>> {
    const withheld = new Set<FoundVersion>();
    const refusedPatients = [...new Set(refused.flatMap((r) => r.patients))].filter((p) => p !== UNPLACED_PATIENT);
    if (refused.length)
      await this.auditRefusal({
        operation: this.context.operation ?? operation,
        action: 'R',
        outcome: 'minor-failure',
        outcomeDescription: `refused: the caller may not see ${refused.length} resource(s) (${[...new Set(refused.map((r) => r.type))].join(', ')})`,
        patient: { id: refusedPatients[0] },
        otherPatients: refusedPatients.slice(1, MAX_PATIENTS_PER_RECORD),
        dataTypes: [...new Set(refused.map((r) => r.type))],
      });
    const withPatients = shown.filter((v) => v.content && this.patientsFiledUnder([v.content]).length);
    if (!withPatients.length) return withheld;
    const { organizationId, readFacts } = this.access;
    const counted = !!readFacts && !!organizationId && (await this.deps.readLimits.limits(organizationId, this.sql));
    const groups = new Map<string, FoundVersion[]>();
    for (const v of withPatients) {
      const key = counted ? this.patientsFiledUnder([v.content!]).sort().join(' ') : '';
      groups.set(key, [...(groups.get(key) ?? []), v]);
    }
    for (const versions of groups.values()) {
      try {
        // Audited and counted as any read of them (every patient counted, however many the record names).
        await this.auditAccess(operation, 'R', versions.map((v) => v.content!));
      } catch (err) {
        if (!(err instanceof ApiError) || err.status !== 429) throw err;
        for (const v of versions) withheld.add(v);
      }
    }
    return withheld;
  }

  /** Instance history (`id` given: 404 when unknown or when the caller may see none of its versions) or type history (only what the caller may see). */
  async history(type: string, id: string | undefined, params: { count?: number; since?: string }): Promise<Bundle> {
    await this.checkReadable(type);
    await this.emergencyFor(async () => (id === undefined ? [] : this.patientsOfResource(type, id)));
    const bundle = await historyBundle(this.sql, this.baseUrl, type, id, params, this.access.rowFilter);
    if (id !== undefined && !bundle.entry?.length) {
      const current = await readVersion(this.sql, type, id);
      if (current) throw await this.refuse('history', type, id);
      throw new ApiError(404, ErrorCode.notFound, `${type}/${id} not found`);
    }
    await this.auditAccess('history', 'R', resourcesOf(bundle));
    return bundle;
  }

  /** FHIR search: only what the caller may see is found, counted or included. */
  async search<T extends Resource>(type: string, query: QueryParams, options: SearchOptions & ReadOptions = {}): Promise<Bundle<T>> {
    await this.checkReadable(type, query);
    const parsed = parseSearch(type, query, this.baseUrl);
    await this.emergencyFor(async () => (options.compartmentPatient !== undefined ? [options.compartmentPatient] : patientNamedBy(parsed)));
    // The audit trail, just materialised (checkReadable), is read from the replica once it has replayed that far:
    // the trail is whole, and what the search includes is seen under the consents of now. Every other type: primary.
    const sql = type === 'AuditEvent' ? await this.currentSql() : this.sql;
    const bundle = await searchResources<T>(sql, this.baseUrl, parsed, query, this.access, options);
    if (options.audit !== false) await this.auditAccess('search', 'R', resourcesOf(bundle));
    return bundle;
  }

  /**
   * The JSON of search(): for a caller that sends it on unread, with the matches as stored (spliced in as
   * PostgreSQL's text of them, never parsed; SearchOptions.asStored).
   */
  async searchJson(type: string, query: QueryParams, options: SearchOptions & ReadOptions = {}): Promise<string> {
    return bundleJson(await this.search(type, query, { ...options, asStored: true }));
  }

  /**
   * The first pages (from `offset`) of several sorted searches of one patient's data, read in one statement (two at
   * once, for many searches on PostgreSQL), each found as search() finds it; not audited: for a translation layer,
   * which audits what it shows. `patientId`: the patient every search names (break-glass opens on them).
   */
  async searchPages(patientId: string, searches: PatientSearch[]): Promise<Array<{ resources: Resource[]; more: boolean }>> {
    for (const { type, query } of searches) await this.checkReadable(type, query);
    await this.emergencyFor(async () => [patientId]);
    const build = (these: PatientSearch[]) =>
      pagesStatement(these.map(({ type, query, offset, except }) => ({ search: parseSearch(type, query, this.baseUrl), offset, except: except?.map((q) => parseSearch(type, q, this.baseUrl)) })), this.access);
    const read = (these: PatientSearch[]) => readPages(this.sql, this.deps.pageShapes.statement(this.policyKey(), patientId, these, build));
    // On PostgreSQL outside a transaction, two statements on two connections at once: PostgreSQL runs them on two
    // cores while this process waits (a records page of every type, ~47 searches, took ~10 ms as one statement,
    // a third of it starting and ending its plan). In a transaction, or on the embedded database's one connection,
    // they would only run in turn: one statement.
    const halves = !this.openTransaction && this.deps.db.backend === 'postgres' && searches.length >= 2 * SEARCHES_APART ? halvesByType(searches) : undefined;
    if (!halves?.[1].length) return read(searches);
    const [first, second] = await Promise.all(halves.map((half) => read(half.map((i) => searches[i]!))));
    const out: Array<{ resources: Resource[]; more: boolean }> = new Array(searches.length);
    halves[0].forEach((i, k) => (out[i] = first![k]!));
    halves[1].forEach((i, k) => (out[i] = second![k]!));
    return out;
  }

  /** The matches of a search (no includes), every page up to the search's `_count`. */
  async searchResources<T extends Resource>(type: string, query: QueryParams, options: ReadOptions = {}): Promise<T[]> {
    const bundle = await this.search<T>(type, query, options);
    return (bundle.entry ?? []).filter((e) => e.search?.mode === 'match').map((e) => e.resource as T);
  }

  /** Patient/$everything: the patient (403 when hidden) and what of their record the caller may see. */
  async everything(patientId: string, params: EverythingParams): Promise<Bundle> {
    await this.emergencyFor(async () => [patientId]);
    const patient = await this.read('Patient', patientId, { audit: false });
    const bundle = await everythingBundle(this.sql, this.baseUrl, patient, params, this.access);
    await this.auditAccess('everything', 'R', resourcesOf(bundle));
    return bundle;
  }

  /**
   * Bulk Data export (src/bulk): the SQL of one page of the current resources of `type` this caller may read,
   * exactly as its search finds them (scopes, consent, classes, ownership; the rule is evaluated when the page is
   * read), narrowed as the export asks, in rid order after `page.afterRid`. Columns: rid, line (the stored resource
   * as JSON text: an ndjson line), patients (space-separated). 403 when the caller may not read `type`, or a `_typeFilter` looks
   * through a type it may not read; 400 for a bad `_typeFilter`.
   */
  async exportPageQuery(type: string, page: ExportPage): Promise<{ sql: string; values: unknown[] }> {
    await this.checkReadable(type, page.typeFilters.length ? { _typeFilter: page.typeFilters.map((f) => JSON.stringify(f)) } : {});
    const r = ident('r');
    const criteria = page.typeFilters.map((query) => {
      const parsed = parseSearch(type, query, this.baseUrl);
      checkSearchReach(parsed, this.access);
      return and(...parsed.filters.map((f) => filterSql(f, r, this.access.rowFilter)));
    });
    const where = and(
      SQL`r.resource_type = ${type}`,
      SQL`NOT r.deleted`,
      SQL`r.rid > ${page.afterRid}::bigint`,
      SQL`r.last_updated <= ${page.until}::timestamptz`,
      !!page.since && SQL`r.last_updated > ${page.since}::timestamptz`,
      page.patients === 'any' ? SQL`cardinality(r.patients) > 0` : !!page.patients && SQL`r.patients && ${page.patients}::text[]`,
      criteria.length > 0 && or(...criteria),
      this.access.rowFilter?.(r, type),
    );
    // The patients as one space-separated text (FHIR ids have none): parsing a text[] per row cost the export ~3 µs a line.
    const { text, values } = SQL`SELECT r.rid, r.content::text AS line, array_to_string(r.patients, ' ') AS patients FROM fhir_resources r WHERE ${where} ORDER BY r.rid LIMIT ${page.limit}`.render();
    return { sql: text, values };
  }

  /**
   * Of `types`, those with any current resource in the store (whoever may read them): lets a bulk export pass over
   * the other ~140 R4 types at once. Reveals nothing to a caller: what each export page holds is exportPageQuery's.
   */
  async typesInStore(types: string[]): Promise<Set<string>> {
    const { rows } = await this.sql.query<{ t: string }>(
      'SELECT u.t FROM unnest($1::text[]) AS u(t) WHERE EXISTS (SELECT 1 FROM fhir_resources r WHERE r.resource_type = u.t AND NOT r.deleted)',
      [types],
    );
    return new Set(rows.map((r) => r.t));
  }

  /**
   * The access rule for data about to be read by a Connect or SDK operation: 403 CONSENT_REQUIRED (audited)
   * unless the caller may see `patientId`'s data of every class in `classes`.
   */
  async requirePatientAccess(patientId: string, classes: string[], operation = this.context.operation ?? 'read', basis: 'records' | 'relationship' = 'records'): Promise<void> {
    const refused = await this.refusedClasses(patientId, classes, basis);
    if (!refused.length) return;
    await this.auditRefusal({ operation, action: 'R', outcome: 'minor-failure', outcomeDescription: `refused: no consent covers ${refused.join(', ')}`, patient: { id: patientId } });
    throw consentRequired(refused);
  }

  /** The classes of `patientId`'s data, among `classes`, that the access rule keeps from the caller (none: all allowed). */
  async refusedClasses(patientId: string, classes: string[], basis: 'records' | 'relationship' = 'records'): Promise<string[]> {
    await this.emergencyFor(async () => [patientId]);
    const check = this.access.patientCheck;
    if (!check || !classes.length) return [];
    const { text, values } = check([{ patient: patientId, classes }], basis).render();
    const { rows } = await this.sql.query<{ c: string }>(text, values);
    return rows.map((r) => r.c);
  }

  /**
   * A standing relationship with the patient (registered them, or holds an active consent of any class, or
   * break-glass): 403 otherwise, audited. What pairing a patient's app needs (src/policy).
   */
  async requireRelationship(patientId: string, operation: string): Promise<void> {
    if (!this.access.patientCheck) return;
    const refused = await this.refusedClasses(patientId, [...DATA_CLASSES], 'relationship');
    if (refused.length < DATA_CLASSES.length) return;
    await this.auditRefusal({ operation, action: 'E', outcome: 'minor-failure', outcomeDescription: 'refused: no registration or consent of this patient', patient: { id: patientId } });
    throw new ApiError(403, ErrorCode.forbidden, 'Only an organisation that registered the patient or holds their active consent may do this');
  }

  /**
   * Break-glass (X-Emergency-Reason with emergency:access): the request must name one patient; a window of
   * EMERGENCY_WINDOW_HOURS on that patient is opened if none is open, and audited with purpose of use BTG.
   */
  private async emergencyFor(patientsNamed: () => Promise<string[]>): Promise<void> {
    const reason = this.context.emergencyReason;
    const org = this.access.organizationId;
    if (reason === undefined || !org) return;
    const patients = await patientsNamed();
    // One patient per request: every read of a batch under one X-Emergency-Reason must name the same patient.
    if (patients.length !== 1 || (this.emergencyPatient !== undefined && patients[0] !== this.emergencyPatient))
      throw new ApiError(403, ErrorCode.forbidden, 'Break-glass reads the data of one patient: name one patient (a resource of one patient, a search by patient, or $everything), the same in every entry of a batch');
    const patientId = patients[0]!;
    this.emergencyPatient = patientId;
    // Opened once per request: the reads of one request may run at once (records' refusals beside their pages).
    await (this.emergencyOpened ??= this.openEmergency(org, patientId, reason));
  }

  /** The window of break-glass on `patientId`, opened unless one is open, and its audit record. */
  private async openEmergency(org: string, patientId: string, reason: string): Promise<void> {
    const principal = this.context.principal as { clientId?: string };
    await this.transaction(async (sql) => {
      const { rowCount } = await sql.query(
        `INSERT INTO emergency_access (organization_id, client_id, patient_id, reason, expires_at)
         SELECT $1, $2, $3, $4, now() + make_interval(hours => $5)
         WHERE NOT EXISTS (SELECT 1 FROM emergency_access WHERE organization_id = $1 AND patient_id = $3 AND expires_at > now())`,
        [org, principal.clientId ?? '', patientId, reason, EMERGENCY_WINDOW_HOURS],
      );
      if (rowCount)
        await this.audit({ operation: 'breakGlass', action: 'E', outcome: 'success', outcomeDescription: `emergency access opened for ${EMERGENCY_WINDOW_HOURS} h`, patient: { id: patientId }, purpose: reason, breakGlass: true });
    });
  }

  /** The patients a stored resource is about (for break-glass: which patient a read names). */
  private async patientsOfResource(type: string, id: string): Promise<string[]> {
    const { rows } = await this.sql.query<{ patients: string[] | null }>('SELECT patients FROM fhir_resources WHERE resource_type = $1 AND id = $2', [type, id]);
    return rows[0]?.patients ?? [];
  }

  // ------------------------------------------------------------------ facility data (derived tables)

  /**
   * Facility data a feature keeps in its derived tables (src/inventory: stock, blood units, payments): not patient
   * data, so no row filter; the route admits the caller, and `read` applies what else the caller's access decides.
   */
  async readFacility<T>(read: (reader: FacilityReader) => Promise<T>): Promise<T> {
    return read({ sql: this.sql, lagTolerantSql: this.lagTolerantSql, now: this.deps.now(), access: this.access });
  }

  // ------------------------------------------------------------------ writes

  /** Creates a resource with a new id. */
  async create<T extends Resource>(resource: T, options: ReadOptions = {}): Promise<T> {
    return this.transaction(async () => (await this.writeItems([{ resource: { ...resource, id: randomUUID() }, method: 'POST' }], 'create', options))[0]!.resource as T);
  }

  /**
   * Conditional create (If-None-Exist): the one resource matching `criteria` (a search query string),
   * or a new one. Race-free on any number of processes: see lockCriteria.
   */
  async conditionalCreate<T extends Resource>(resource: T, criteria: string): Promise<WriteOutcome<T>> {
    return this.transaction(async () => {
      const existing = await this.matchOne<T>(resource.resourceType, criteria, 'If-None-Exist');
      if (existing) return { resource: existing, created: false };
      return { resource: await this.create(resource), created: true };
    });
  }

  /** Update, or create with the given id when it does not exist yet (update-as-create); `ifMatch` makes it version-checked. */
  async update<T extends Resource>(resource: T, options: { ifMatch?: string } & ReadOptions = {}): Promise<WriteOutcome<T>> {
    if (!resource.id) throw badRequest('Resource id is required for an update');
    return this.transaction(async () => {
      const [result] = await this.writeItems([{ resource, method: 'PUT', ifMatch: options.ifMatch }], 'update', { audit: options.audit });
      return { resource: result!.resource as T, created: result!.created };
    });
  }

  /** Conditional update (`PUT Type?criteria`): updates the one match, or creates (with the body's id, or a new one). */
  async conditionalUpdate<T extends Resource>(resource: T, criteria: string): Promise<WriteOutcome<T>> {
    return this.transaction(async () => {
      const existing = await this.matchOne(resource.resourceType, criteria, 'Conditional update');
      if (existing && resource.id !== undefined && resource.id !== existing.id)
        throw badRequest(`The body's id ${resource.id} is not the id of the resource the criteria match (${existing.id})`);
      return this.update({ ...resource, id: existing?.id ?? resource.id ?? randomUUID() });
    });
  }

  /** Deletes (idempotent: deleting what is absent succeeds); 409 while another resource refers to it. */
  async delete(type: string, id: string, options: { ifMatch?: string } = {}): Promise<void> {
    checkType(type);
    await this.transaction(() => this.writeItems([{ resource: { resourceType: type, id } as Resource, method: 'DELETE', ifMatch: options.ifMatch }], 'delete'));
  }

  /**
   * Conditional delete (`DELETE Type?criteria`, `conditionalDelete: single`): the one match the caller may see, deleted
   * as `delete` deletes it (the owner rule, If-Match, references to it); none: nothing to delete (as a delete of what is
   * absent); several: 412, nothing deleted. The match is found under matchOne's lock, so a burst deletes once.
   */
  async conditionalDelete(type: string, criteria: string, options: { ifMatch?: string } = {}): Promise<void> {
    checkType(type);
    // A type no client deletes (Consent, AuditEvent) is refused before any search: its 403 whether or not one matches.
    this.checkWritable(type);
    await this.transaction(async () => {
      const match = await this.matchOne(type, criteria, 'Conditional delete');
      if (match) await this.delete(type, match.id!, options);
    });
  }

  /**
   * PATCH (JSON Patch or FHIRPath Patch, src/fhir/patch.ts): the current version changed by `patch`, written as an
   * update of that version, so the owner rule, validation, references, events and audit are the update's.
   */
  async patch<T extends Resource>(type: string, id: string, patch: Patch, options: { ifMatch?: string } = {}): Promise<T> {
    return this.transaction(async () => {
      const [result] = await this.writeItems([await this.patched(type, id, patch, options.ifMatch)], 'patch');
      return result!.resource as T;
    });
  }

  /** Conditional patch (`PATCH Type?criteria`): the one match (none: 404, several: 412), patched. */
  async conditionalPatch<T extends Resource>(type: string, criteria: string, patch: Patch, options: { ifMatch?: string } = {}): Promise<T> {
    return this.transaction(async () => {
      const match = await this.matchOne(type, criteria, 'Conditional patch');
      if (!match) throw new ApiError(404, ErrorCode.notFound, `Conditional patch: no ${type} the caller may see matches the criteria`);
      return this.patch<T>(type, match.id!, patch, options);
    });
  }

  /**
   * The write a PATCH makes, for `patch` and a transaction's PATCH entries: the current version, locked until the
   * transaction ends and read under the read rule (a hidden resource, or one the caller may not change, is the audited
   * 404 of a missing one), checked against `If-Match` (412), patched, and validated as the store validates (an invalid
   * result is a 422: nothing is written); then an update of exactly the version read.
   */
  async patched(type: string, id: string, patch: Patch, ifMatch?: string): Promise<WriteItem> {
    checkType(type);
    return this.transaction(async (sql) => {
      await sql.query('SELECT 1 FROM fhir_resources WHERE resource_type = $1 AND id = $2 FOR UPDATE', [type, id]);
      const current = await this.read(type, id, { audit: false });
      // Before the patch is applied: a caller who may see but not change the resource learns no more than a read tells.
      if (!(await this.mayChange(type, id))) throw await this.refuse('patch', type, id, undefined, 'U');
      const version = current.meta!.versionId!;
      if (ifMatch !== undefined && versionTag(ifMatch) !== version)
        throw new ApiError(412, ErrorCode.preconditionFailed, `Version conflict: ${type}/${id} is not at version ${versionTag(ifMatch)}`);
      const resource = applyResourcePatch(current, patch);
      try {
        validateFhirResource(resource);
      } catch (err) {
        if (err instanceof ApiError && err.status === 400) throw new ApiError(422, err.code, `The patched resource is invalid: ${err.message}`, err.options);
        throw err;
      }
      return { resource, method: 'PUT', ifMatch: version };
    });
  }

  /**
   * Whether the caller may update or delete this stored resource (the owner rule the writes apply), for `$validate`:
   * it answers what the write would, without writing.
   */
  /**
   * What deleting `type/id` would answer about the resources that still refer to it (the 409 of checkReferences,
   * naming a referrer only if the caller may see it), without deleting: for `$validate` mode=delete.
   */
  async deleteConflict(type: string, id: string): Promise<ApiError | undefined> {
    const resource = { resourceType: type, id } as Resource;
    const deletion = { resource, created: false, changed: true, method: 'DELETE', patients: [] } as unknown as WriteResult;
    try {
      await checkReferences(this.sql, this.baseUrl, [{ resource, method: 'DELETE' }], [deletion], this.governed(type) ? this.access.rowFilter : undefined);
      return undefined;
    } catch (err) {
      if (err instanceof ApiError) return err;
      throw err;
    }
  }

  async mayChange(type: string, id: string): Promise<boolean> {
    if (!this.governed(type)) return true;
    const owned = this.access.ownerFilter?.(ident('r')) ?? SQL`true`;
    const { text, values } = SQL`SELECT COALESCE(${owned}, false) AS owned FROM fhir_resources r WHERE r.resource_type = ${type} AND r.id = ${id}`.render();
    const { rows } = await this.sql.query<{ owned: boolean }>(text, values);
    return rows[0]?.owned === true;
  }

  /**
   * The search match for a conditional write, under a lock on (type, criteria) held until the
   * transaction ends, so that concurrent conditional writes with the same criteria see each other:
   * exactly one creates. 412 when the criteria match more than one resource.
   */
  async matchOne<T extends Resource>(type: string, criteria: string, what: string): Promise<T | undefined> {
    // The criteria are a search: evaluated only over what the caller may read (a match it may not see is no
    // match), so a conditional write never reveals, returns or counts another organisation's data.
    await this.checkReadable(type);
    const query = new URLSearchParams(criteria.replace(/^[^?]*\?/, ''));
    // The criteria are what selects. A result parameter (_count, _sort, _summary, _cursor, _include…) shapes a search's
    // answer, not what matches, and is left out: `_count=1` alone would make any one resource the match, a cursor
    // would page past the 412, `_summary=count` would match nothing. An empty value selects nothing (FHIR: ignored).
    // The lock is taken on what is left, so criteria written differently but selecting alike wait for each other.
    const pairs = [...query]
      .filter(([name, value]) => value !== '' && !isResultParameter(name))
      .sort(([a, x], [b, y]) => (a === b ? (x < y ? -1 : x > y ? 1 : 0) : a < b ? -1 : 1));
    // Each pair left is a filter (or a parameter the parser refuses): a search of none would match everything.
    if (!pairs.length) throw badRequest(`${what}: no search criteria select anything (an empty value selects nothing, nor do _count, _sort, _summary, _cursor and the other result parameters)`);
    await this.sql.query('SELECT pg_advisory_xact_lock($1::bigint)', [hashKey('conditional-write', type, JSON.stringify(pairs))]);
    const params: QueryParams = {};
    for (const [k, v] of pairs) params[k] = params[k] === undefined ? v : ([] as string[]).concat(params[k]!, v);
    const parsed = parseSearch(type, params, this.baseUrl);
    const matches = await searchResources<T>(this.sql, this.baseUrl, { ...parsed, count: 2, total: 'none' }, params, this.access);
    const found = (matches.entry ?? []).filter((e) => e.search?.mode === 'match').map((e) => e.resource as T);
    if (found.length > 1) {
      // The answer tells the caller that several it may see match: audited as the search it amounts to.
      await this.auditAccess('read', 'R', found);
      throw new ApiError(412, ErrorCode.preconditionFailed, `${what} matched more than one resource`);
    }
    // The match is shown to the caller (conditional create returns it, in a bundle too): audited as a read.
    if (found[0]) await this.auditAccess('read', 'R', [found[0]]);
    return found[0];
  }

  /**
   * Writes several resources in the open transaction: the store's write, then referential integrity,
   * the Health ID registry, the events and the audit record. For bundles and imports; routes and
   * services use create / update / delete.
   */
  async writeItems(items: WriteItem[], operation: string, options: WriteOptions = {}): Promise<WriteResult[]> {
    const sql = this.openTransaction?.sql;
    if (!sql) return this.transaction(() => this.writeItems(items, operation, options));
    for (const { resource } of items) this.checkWritable(resource.resourceType);
    const registered: Registered[] = [];
    const principal = this.context.principal;
    const writer = principal.kind === 'client' || principal.kind === 'bridge-agent' ? (principal.organizationId ?? null) : null;
    const bindings = this.deps.bindings;
    const results = await writeMany(sql, this.baseUrl, items, {
      authorOf: (resource) => this.deps.authorOf?.(resource) ?? writer,
      ...(bindings ? { checkBindings: (resources: Resource[]) => bindings.refusals(sql, resources) } : {}),
      prepare: async (resource, previous) => {
        if (resource.resourceType !== 'Patient') return resource;
        const outcome = await withHealthId(sql, resource as Patient, previous as Patient | undefined);
        if (outcome.registered) registered.push(outcome.registered);
        return outcome.patient;
      },
    });
    // Ownership once the items are validated (a hidden resource and a missing one answer a bad body alike); the
    // transaction has written nothing that outlives a refusal.
    await this.checkOwnership(sql, items);
    const changed = results.filter((r) => r.changed);
    const governed = items.some((i) => this.governed(i.resource.resourceType));
    if (!options.deferReferenceCheck) await checkReferences(sql, this.baseUrl, items, results, governed ? this.access.rowFilter : undefined);
    await this.fileUnderReferencedPatients(sql, changed);
    await this.checkNewData(sql, changed);
    for (const r of changed)
      if (r.resource.resourceType === 'Patient')
        await updateMatchKey(sql, r.resource.id!, r.method === 'DELETE' ? null : this.deps.matchKeyOf(r.resource as Patient));
    for (const table of this.deps.derived) {
      const mine = changed.filter((r) => r.resource.resourceType === table.resourceType);
      if (mine.length) await table.sync(sql, mine);
    }
    await this.recordChangeEvents(sql, changed, registered);
    const action: AuditAction = changed.every((r) => r.method === 'DELETE') ? 'D' : changed.every((r) => r.created) ? 'C' : 'U';
    if (options.audit !== false)
      await this.auditAccess(operation, action, changed.map((r) => (r.method === 'DELETE' ? withFiledPatients(r.previous ?? r.resource, r.previousPatients) : withFiledPatients(r.resource, r.patients))));
    return results;
  }

  // ------------------------------------------------------------------ the write policy (src/policy)

  /** Writes the access policy governs: all but the managed types written through their own routes (consents). */
  private governed(type: string): boolean {
    return !this.access.operator && !(MANAGED_TYPES[type] && this.context.channel !== 'fhir');
  }

  /**
   * Update and delete: only the owner of an existing resource (any version, deleted ones too). Anyone else,
   * and a delete of what never existed, gets the 404 of a resource that does not exist (audited).
   */
  private async checkOwnership(sql: Queryable, items: WriteItem[]): Promise<void> {
    const existing = items.filter((i) => i.method !== 'POST' && this.governed(i.resource.resourceType));
    if (!existing.length) return;
    const owned = this.access.ownerFilter?.(ident('r')) ?? SQL`true`;
    const { text, values } = SQL`SELECT k.n, r.rid IS NOT NULL AS found, COALESCE(${owned}, false) AS owned
       FROM unnest(${existing.map((i) => i.resource.resourceType)}::text[], ${existing.map((i) => i.resource.id)}::text[]) WITH ORDINALITY AS k(t, i, n)
       LEFT JOIN fhir_resources r ON r.resource_type = k.t AND r.id = k.i ORDER BY k.n`.render();
    const { rows } = await sql.query<{ n: string; found: boolean; owned: boolean }>(text, values);
    for (const row of rows) {
      const item = existing[Number(row.n) - 1]!;
      const { resourceType, id } = item.resource;
      const where = item.label ? `${item.label}: ` : '';
      if (row.found && !row.owned) {
        const refusal = await this.refuse(item.method === 'DELETE' ? 'delete' : 'update', resourceType, id!, undefined, item.method === 'DELETE' ? 'D' : 'U');
        throw new ApiError(404, ErrorCode.notFound, `${where}${refusal.message}`);
      }
      if (!row.found && item.method === 'DELETE') throw new ApiError(404, ErrorCode.notFound, `${where}${resourceType}/${id} not found`);
    }
  }

  /**
   * Data tied to a patient only through another resource (a DocumentReference of an Encounter, a Provenance of a
   * Condition, an Observation of a Specimen) is filed under that resource's patients too, so that it is governed
   * like the data it belongs to. One level of references is looked up; the referenced rows were filed the same
   * way when written, so the chain is followed as far as data was written in order.
   */
  private async fileUnderReferencedPatients(sql: Queryable, changed: WriteResult[]): Promise<void> {
    const written = changed.filter((r) => r.method !== 'DELETE' && r.resource.resourceType !== 'Patient' && r.resource.resourceType !== 'AuditEvent');
    const targets: Array<{ n: number; type: string; id: string }> = [];
    written.forEach((r, n) => {
      for (const l of r.links) if (l.targetType !== 'Patient') targets.push({ n, type: l.targetType, id: l.targetId });
    });
    if (!targets.length) return;
    const found = SQL`SELECT k.n, t.patients FROM ${rowsOf('k', [['n', 'int'], ['t', 'text'], ['i', 'text']], paddedRows(targets.map((t) => [t.n, t.type, t.id])))}
       JOIN fhir_resources t ON t.resource_type = k.t AND t.id = k.i WHERE t.patients IS NOT NULL AND t.patients <> '{}'::text[]`.render();
    const { rows } = await sql.query<{ n: number; patients: string[] }>(found.text, found.values);
    const grown = new Set<WriteResult>();
    for (const row of rows) {
      const r = written[row.n]!;
      for (const p of row.patients)
        if (p !== UNPLACED_PATIENT && !r.patients.includes(p)) {
          r.patients = [...r.patients, p];
          grown.add(r);
        }
    }
    if (!grown.size) return;
    const list = [...grown];
    await sql.query(
      `UPDATE fhir_resources r SET patients = ARRAY(SELECT jsonb_array_elements_text(p.value))
       FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS k(t, i, n) JOIN jsonb_array_elements($3::jsonb) WITH ORDINALITY AS p(value, n) ON p.n = k.n
       WHERE r.resource_type = k.t AND r.id = k.i`,
      [list.map((r) => r.resource.resourceType), list.map((r) => r.resource.id), JSON.stringify(list.map((r) => r.patients))],
    );
  }

  /**
   * What a write files under patients and facilities: data about a patient Pont cannot place (422), data about
   * a patient the caller has no right to create data for (consent covering the class, the registering
   * organisation, or break-glass: 403 CONSENT_REQUIRED), and facility data of another facility (403).
   */
  private async checkNewData(sql: Queryable, changed: WriteResult[]): Promise<void> {
    const governed = changed.filter((r) => this.governed(r.resource.resourceType));
    if (!governed.length) return;
    for (const table of this.deps.derived) {
      if (!table.facilityOf) continue;
      for (const r of governed) {
        if (r.resource.resourceType !== table.resourceType) continue;
        for (const version of [r.method === 'DELETE' ? undefined : r.resource, r.previous]) {
          const facility = version && table.facilityOf(version);
          if (facility !== undefined && !this.access.mayWriteFacility(facility))
            throw new ApiError(403, ErrorCode.forbidden, `${r.resource.resourceType}/${r.resource.id} is data of facility ${facility}: only clients and agents bound to that facility (or operators) write it`);
        }
      }
    }
    const pairs: Array<{ patient: string; dataClass: string; type: string }> = [];
    for (const r of governed) {
      if (r.method === 'DELETE') continue;
      if (r.patients.includes(UNPLACED_PATIENT)) {
        const reason = unplacedReason(r.resource, this.baseUrl) ?? 'the patient this data is about cannot be placed';
        throw new ApiError(422, ErrorCode.validationFailed, `${r.resource.resourceType}: ${reason}`, {
          issues: [{ severity: 'error', code: 'business-rule', diagnostics: reason, details: { text: reason } }],
        });
      }
      for (const patient of r.patients)
        if (!r.previousPatients.includes(patient)) pairs.push({ patient, dataClass: dataClassOf(r.resource.resourceType), type: r.resource.resourceType });
    }
    if (!pairs.length || !this.access.patientCheck) return;
    // Every patient of the batch in one statement (a Bridge batch or a transaction Bundle names many).
    const { text, values } = this.access.patientCheck([...groupBy(pairs)].map(([patient, classes]) => ({ patient, classes })), 'relationship').render();
    const { rows } = await sql.query<{ p: string; c: string }>(text, values);
    if (!rows.length) return;
    const refused = [...groupBy(rows.map((r) => ({ patient: r.p, dataClass: r.c })))].map(([patient, classes]) => ({ patient, classes }));
    const first = refused[0]!;
    await this.auditRefusal({
      operation: this.context.operation ?? 'create',
      action: 'C',
      outcome: 'minor-failure',
      outcomeDescription: `refused: no consent or registration allows writing ${first.classes.join(', ')} data about this patient`,
      patient: { id: first.patient },
      otherPatients: refused.slice(1, MAX_PATIENTS_PER_RECORD).map((r) => r.patient),
      dataTypes: [...new Set(pairs.map((p) => p.type))],
    });
    throw consentRequired(first.classes);
  }

  // ------------------------------------------------------------------ events and audit

  /** Records an event that is not a resource change (e.g. `health_id.verified`), in the open transaction. */
  async recordEvent(event: { type: EventType; data: Record<string, unknown>; patientId?: string }): Promise<void> {
    await this.transaction((sql) => recordEvents(sql, [this.newEvent(event)]));
  }

  /**
   * A domain-level audit record (a Connect operation's own, e.g. a resolve that found nothing). Break-glass requests
   * say so. `fetch`, of a read: every patient it concerns (the record names at most 50; each one's consents count the
   * read) and, for a read that is one of the several making a fetch (a bulk export's files), the fetch's key, so that
   * the fetch counts once against each consent's frequency.
   */
  async audit(record: Omit<AuditRecord, 'caller'>, fetch?: { patients: string[]; key?: string }): Promise<void> {
    const emergency = this.context.emergencyReason;
    // A read of patient data (not only of consents): counted against the consents' frequency, its purpose coded.
    const patients = fetch?.patients ?? (record.patient?.id ? [record.patient.id, ...(record.otherPatients ?? [])] : []);
    if (record.action === 'R' && record.outcome === 'success' && patients.length && (record.dataTypes ?? []).some((t) => t !== 'Consent' && t !== 'AuditEvent')) {
      record = { ...record, ...(await this.purposeOfRead(patients, fetch?.key)) };
    }
    const marked = emergency === undefined ? record : { ...record, breakGlass: true, purpose: record.purpose ?? emergency };
    const full = { ...marked, caller: this.caller };
    // In a transaction (a write, a composed operation): with it. Otherwise (a read): in the next group commit.
    const open = this.openTransaction;
    if (open) await recordAudit(open.sql, full);
    else await this.deps.auditTrail.append(full);
  }

  /** Who is asking, as the audit trail names them. */
  get caller(): AuditCaller {
    return { principal: this.context.principal, requestId: this.context.requestId, address: this.context.address };
  }

  private newEvent(event: { type: EventType; data: Record<string, unknown>; patientId?: string }): NewEvent {
    const principal = this.context.principal;
    return {
      ...event,
      organizationId: principal.kind === 'client' || principal.kind === 'bridge-agent' ? principal.organizationId : undefined,
      facilityId: principal.kind === 'client' || principal.kind === 'bridge-agent' ? principal.facilityId : undefined,
      environment: this.deps.environment,
      requestId: this.context.requestId,
    };
  }

  private async recordChangeEvents(sql: Queryable, changed: WriteResult[], registered: Registered[]): Promise<void> {
    if (!changed.length) return;
    const changes: ResourceChange[] = changed.map((r) => ({
      interaction: r.method === 'DELETE' ? 'delete' : r.created ? 'create' : 'update',
      before: r.previous,
      after: r.method === 'DELETE' ? undefined : r.resource,
    }));
    const healthIds = await healthIdsByPatient(sql, patientIdsOf(changes));
    const principal = this.context.principal;
    const context = {
      healthIdOf: (id: string | undefined) => (id ? (healthIds.get(id) ?? null) : null),
      facilityId: (principal.kind === 'client' || principal.kind === 'bridge-agent' ? principal.facilityId : undefined) ?? null,
      read: this.deps.readAs,
    };
    const events = changes.flatMap((c) => eventsOf(c, context)).map((e) => this.newEvent(e));
    for (const r of registered)
      events.push(this.newEvent({ type: 'health_id.created', patientId: r.patientId, data: { health_id: r.healthId, patient_id: r.patientId, country_code: r.countryCode } }));
    await recordEvents(sql, events);
    await resourcesChanged(sql, changes);
  }

  /**
   * The audit record of an interaction with patient data (nothing when it touched none, and nothing for
   * reads of the audit trail itself), in the open transaction or, for a read outside one, its own.
   */
  private async auditAccess(operation: string, action: AuditAction, resources: Resource[], outcome: AuditRecord['outcome'] = 'success'): Promise<void> {
    const patients = this.patientsFiledUnder(resources);
    if (!patients.length) return;
    const named = patients.slice(0, MAX_PATIENTS_PER_RECORD);
    await this.audit({
      operation: this.context.operation ?? operation,
      action,
      outcome,
      outcomeDescription:
        outcome === 'success'
          ? `${resources.length} resource(s) of ${patients.length} patient(s)${patients.length > named.length ? `; first ${named.length} named` : ''}`
          : 'refused: the caller may not see this patient data',
      patient: { id: named[0] },
      otherPatients: named.slice(1),
      purpose: this.context.emergencyReason ?? this.context.purpose,
      breakGlass: this.context.emergencyReason !== undefined,
      externalReference: this.context.externalReference,
      dataTypes: [...new Set(resources.map((r) => r.resourceType))],
    }, { patients });
  }

  /**
   * The patients whose data `resources` are: those each was filed under when read or written (the access rule's:
   * its compartment and the patients of what it refers to), else its compartment's.
   */
  private patientsFiledUnder(resources: Resource[]): string[] {
    const ids = new Set<string>();
    for (const r of resources) {
      if (r.resourceType === 'AuditEvent') continue;
      for (const id of filedPatients(r) ?? patientsOf([r], this.baseUrl)) if (id !== UNPLACED_PATIENT) ids.add(id);
    }
    return [...ids];
  }

  /**
   * A read of patient data, as the policy counts and audits it: the purpose of use to audit, the one the request
   * stated or else its consent's. Only the reads of an organisation holding a consent that limits how often it reads
   * (ReadLimits) are counted, in one statement (src/policy readFacts) that answers 429 once a consent's frequency is
   * spent and the purpose at once; the others cost no statement: their consent's purpose is looked up as the audit
   * row is written (insertAuditRows).
   */
  private async purposeOfRead(patients: string[], fetchKey?: string): Promise<Pick<AuditRecord, 'purposeCode' | 'purposeFromConsent'>> {
    const { organizationId, readFacts, statedPurpose, readsCounted } = this.access;
    if (!readFacts || !organizationId) return {};
    // Not known to be free of limits when the policy was made: counted if a limit is found now (this lookup is newer
    // than the data read, so it sees every consent the read used).
    if (readsCounted && (await this.deps.readLimits.limits(organizationId, this.sql))) return { purposeCode: await this.countRead(readFacts(patients, fetchKey)) };
    return statedPurpose ? { purposeCode: statedPurpose } : { purposeFromConsent: true };
  }

  /** Runs the policy's readFacts statement: 429 once a consent's frequency is spent, else the purpose of use to audit. */
  private async countRead(facts: Sql): Promise<string | undefined> {
    const { text, values } = facts.render();
    const { rows } = await this.sql.query<{ purpose: string | null; exceeded: Array<{ consent_id: string; retry_after: number }> | null }>(text, values);
    const exceeded = rows[0]?.exceeded;
    if (exceeded?.length) {
      const retryAfter = Math.max(...exceeded.map((r) => r.retry_after));
      throw new ApiError(429, ErrorCode.rateLimited, `The consent's frequency is spent for this period (consent ${exceeded.map((r) => r.consent_id).join(', ')}); retry in ${retryAfter} s`, {
        extra: { retry_after: retryAfter },
        headers: { 'Retry-After': String(retryAfter) },
      });
    }
    return rows[0]?.purpose ?? undefined;
  }

  /** A resource the access rule let through: audited (unless the caller audits), returned. */
  private async shown<T extends Resource>(operation: string, resource: T, options: ReadOptions): Promise<T> {
    if (options.audit !== false) await this.auditAccess(operation, 'R', [resource]);
    return resource;
  }

  /**
   * A refusal of the access policy on a resource that exists: audited (outcome 4, naming the resource's
   * patients), then the 404 that a resource that does not exist gets, so that a caller without rights learns
   * nothing, not even that it exists.
   */
  private async refuse(operation: string, type: string, id: string, versionId?: string, action: AuditAction = 'R'): Promise<ApiError> {
    const patients = (await this.patientsOfResource(type, id)).filter((p) => p !== UNPLACED_PATIENT);
    await this.auditRefusal({
      operation: this.context.operation ?? operation,
      action,
      outcome: 'minor-failure',
      outcomeDescription: `refused: the caller may not ${action === 'R' ? 'see' : 'change'} ${type}/${id}`,
      patient: { id: patients[0] },
      otherPatients: patients.slice(1, MAX_PATIENTS_PER_RECORD),
      dataTypes: [type],
    });
    return missing(type, id, undefined, versionId)!;
  }

  /**
   * The audit record of a refused access. Inside a transaction it is written once the transaction ends,
   * whether it commits or (as a refusal usually makes it) rolls back; outside one, at once.
   */
  private async auditRefusal(record: Omit<AuditRecord, 'caller'>): Promise<void> {
    const emergency = this.context.emergencyReason;
    const full: AuditRecord = { purpose: emergency ?? this.context.purpose, breakGlass: emergency !== undefined, ...record, caller: this.caller };
    accessRefusals.inc({ channel: this.context.channel, action: record.action });
    const open = this.openTransaction;
    if (open) open.refusals.push(full);
    else await this.deps.auditTrail.append(full);
  }

  /** Checks the caller may read `type` at all; before a read that may show AuditEvents, materialises the whole trail. */
  private async checkReadable(type: string, query: QueryParams = {}): Promise<void> {
    checkType(type);
    if (!this.access.canRead(type)) throw new ApiError(403, ErrorCode.forbidden, `No read access to ${type}`);
    if (readsAuditTrail(type, query)) await this.deps.auditTrail.catchUp(this.openTransaction?.sql);
  }

  /** 403 for the types this channel may not write (MANAGED_TYPES); `$validate` reports it as an issue. */
  checkWritable(type: string): void {
    checkType(type);
    const channels = MANAGED_TYPES[type];
    if (channels && !channels.includes(this.context.channel))
      throw new ApiError(403, ErrorCode.forbidden, type === 'Consent' ? 'Consents are given through the consent routes, not written through FHIR' : `${type} resources are written by Pont only`);
    if (!this.access.canWrite(type)) throw new ApiError(403, ErrorCode.forbidden, `No write access to ${type}`);
  }
}

/** (patient, class) pairs grouped by patient. */
function groupBy(pairs: Array<{ patient: string; dataClass: string }>): Map<string, string[]> {
  const by = new Map<string, string[]>();
  for (const { patient, dataClass } of pairs) {
    const classes = by.get(patient) ?? [];
    if (!classes.includes(dataClass)) classes.push(dataClass);
    by.set(patient, classes);
  }
  return by;
}

/** 403 CONSENT_REQUIRED: the one refusal of the access rule (an OperationOutcome on FHIR routes). */
function consentRequired(classes: string[]): ApiError {
  return new ApiError(
    403,
    ErrorCode.consentRequired,
    `No active consent of the patient covers this access${classes.length ? ` (${classes.join(', ')})` : ''}: grant or request consent first`,
    { extra: classes.length ? { required_classes: classes } : undefined },
  );
}

/** The patients a search names through a reference to a Patient (`patient=`, `subject=Patient/…`; `_id` on Patient). */
function patientNamedBy(search: ParsedSearch): string[] {
  const named = new Set<string>();
  for (const f of search.filters) {
    if (search.resourceType === 'Patient' && f.kind === 'id' && !f.not) f.values.forEach((id) => named.add(id));
    if (f.kind === 'reference')
      for (const v of f.values) if (namesPatient(f.param, v)) named.add(v.id);
  }
  return [...named];
}

/**
 * Reads that may return AuditEvents, or depend on them (`_revinclude=AuditEvent:…`, `_has:AuditEvent:…`): the
 * audit trail is materialised before them (AuditTrail.catchUp), so they see every access recorded so far.
 */
function readsAuditTrail(type: string, query: QueryParams): boolean {
  const mentions = (text: string) => text.includes('AuditEvent');
  return mentions(type) || Object.entries(query).some(([k, v]) => mentions(k) || [v].flat().some((x) => x !== undefined && mentions(String(x))));
}

/** The most patients one audit record names; a larger search says how many more in its description. */
const MAX_PATIENTS_PER_RECORD = 50;

function resourcesOf(bundle: Bundle): Resource[] {
  return (bundle.entry ?? []).flatMap((e) => (e.resource && e.resource.resourceType !== 'OperationOutcome' ? [e.resource] : []));
}

/**
 * Referential integrity (as HAPI enforces by default): every local reference of what was written names a
 * resource that exists (400 naming the element; a bundle's own writes count, as they are in the same
 * transaction), and nothing still refers to what was deleted (409, unless the referrer was deleted too).
 * `visible`: the caller's read rule; a resource it may not see counts as missing (a reference is no way to learn
 * that a hidden resource exists, nor to pin another organisation's data), and a 409 names a referrer only if the
 * caller may see it. Patients are the exception: writing about one is the create rule's to decide (consent of the
 * data's class, which need not cover the Patient resource itself), and it refuses with 403.
 */
export async function checkReferences(sql: Queryable, base: string, items: WriteItem[], results: WriteResult[], visible?: RowFilter): Promise<void> {
  const label = (i: number) => (items[i]?.label ? `${items[i]!.label}: ` : '');
  const targets: Array<{ index: number; type: string; id: string; path: string }> = [];
  const deleted: Array<{ index: number; type: string; id: string }> = [];
  let unresolved: { index: number; path: string; reference: string } | undefined;
  results.forEach((r, index) => {
    if (!r.changed) return;
    if (r.method === 'DELETE') return void deleted.push({ index, type: r.resource.resourceType, id: r.resource.id! });
    const found = linksOf(r.resource, base);
    if (found.unresolved.length && !unresolved) unresolved = { index, path: found.unresolved[0]!.path, reference: found.unresolved[0]!.targetId };
    for (const l of found.links) targets.push({ index, type: l.targetType, id: l.targetId, path: l.path });
  });
  let missing: (typeof targets)[number] | undefined;
  if (targets.length) {
    // A Patient is the create rule's to judge (below): the rule is asked of the other types named.
    const seen = rowsOfTypes(visible, ident('r'), targets.flatMap((t) => (t.type === 'Patient' ? [] : [t.type])));
    const { text, values } = SQL`SELECT k.n FROM ${rowsOf('k', [['t', 'text'], ['i', 'text'], ['n', 'int']], paddedRows(targets.map((t, n) => [t.type, t.id, n])))}
       WHERE NOT EXISTS (SELECT 1 FROM fhir_resources r WHERE ${and(SQL`r.resource_type = k.t AND r.id = k.i AND NOT r.deleted`, visible && or(SQL`r.resource_type = 'Patient'`, seen))})
       ORDER BY k.n LIMIT 1`.render();
    const { rows } = await sql.query<{ n: number }>(text, values);
    missing = rows[0] && targets[rows[0].n];
  }
  // The first offending entry is the one named, whichever kind of problem it has.
  if (unresolved && (!missing || unresolved.index <= missing.index)) {
    const why = CONDITIONAL_REFERENCE.test(unresolved.reference)
      ? 'a conditional reference: only a transaction resolves one (to the one resource its search matches); elsewhere refer to the resource by its id'
      : 'which no entry of the Bundle defines';
    throw referenceError(400, `${label(unresolved.index)}${unresolved.path} refers to ${clipped(unresolved.reference)}, ${why}`, unresolved.path);
  }
  if (missing) throw referenceError(400, `${label(missing.index)}${missing.path} refers to ${missing.type}/${missing.id}, which does not exist`, missing.path);
  const crossed = await anotherPatientsEncounter(sql, base, results, targets);
  if (crossed)
    throw referenceError(400, `${label(crossed.index)}${crossed.path} refers to Encounter/${crossed.id}, which is another patient's encounter: what happened in a visit is of that visit's patient`, crossed.path);
  if (deleted.length) {
    const { text, values } = SQL`SELECT l.target_type, l.target_id, s.resource_type, s.id, l.path, (${visible?.(ident('s')) ?? SQL`true`}) AS seen
       FROM unnest(${deleted.map((d) => d.type)}::text[], ${deleted.map((d) => d.id)}::text[]) AS k(t, i)
       JOIN fhir_links l ON l.target_id = k.i AND l.target_type = k.t
       JOIN fhir_resources s ON s.rid = l.rid AND NOT s.deleted
       LIMIT 1`.render();
    const { rows } = await sql.query<{ target_type: string; target_id: string; resource_type: string; id: string; path: string; seen: boolean }>(text, values);
    const held = rows[0];
    if (held) {
      const index = deleted.find((d) => d.type === held.target_type && d.id === held.target_id)!.index;
      const referrer = held.seen ? `${held.resource_type}/${held.id} refers to it (${held.path})` : 'another resource refers to it';
      throw referenceError(
        409,
        `${label(index)}${held.target_type}/${held.target_id} cannot be deleted: ${referrer}; delete or change that first, or in the same transaction`,
        held.seen ? held.path : `${held.target_type}`,
      );
    }
  }
}

/**
 * The patient a resource is of by its `subject` (or `patient`), when that names one of ours: the patient whose visit
 * its encounter must be, whoever else it names (an Observation's `focus` or `performer` may be another patient).
 */
function subjectOf(resource: Resource, base: string): string[] | undefined {
  const { subject, patient } = resource as { subject?: { reference?: unknown }; patient?: { reference?: unknown } };
  const reference = (subject ?? patient)?.reference;
  const target = typeof reference === 'string' ? referenceTarget(reference, base) : undefined;
  return target?.[0] === 'Patient' ? [target[1]] : undefined;
}

/**
 * The first reference, among `targets` (every one found, and visible to the writer), of a written resource to the
 * Encounter it happened in (`…encounter`, `…context`) when that Encounter is another patient's: a result of one patient
 * filed in another's visit would be shown as that visit's, and the visit's as theirs.
 */
async function anotherPatientsEncounter(sql: Queryable, base: string, results: WriteResult[], targets: Array<{ index: number; type: string; id: string; path: string }>) {
  const context = targets.filter((t) => t.type === 'Encounter' && /\.(encounter|context)$/.test(t.path) && results[t.index]!.resource.resourceType !== 'Encounter');
  const rows = context.flatMap((t, n) => {
    const patients = subjectOf(results[t.index]!.resource, base) ?? accessPatients(results[t.index]!.resource, base);
    return patients.length ? [[t.id, n, JSON.stringify(patients)] as const] : [];
  });
  if (!rows.length) return undefined;
  const { text, values } = SQL`SELECT k.n FROM ${rowsOf('k', [['i', 'text'], ['n', 'int'], ['p', 'text']], paddedRows(rows))}
     JOIN fhir_resources r ON r.resource_type = 'Encounter' AND r.id = k.i AND NOT r.deleted
     WHERE cardinality(r.patients) > 0 AND NOT r.patients && ARRAY(SELECT jsonb_array_elements_text(k.p::jsonb))
     ORDER BY k.n LIMIT 1`.render();
  const { rows: found } = await sql.query<{ n: number }>(text, values);
  return found[0] && context[found[0].n];
}

function referenceError(status: 400 | 409, message: string, path: string): ApiError {
  return new ApiError(status, status === 400 ? ErrorCode.badRequest : ErrorCode.conflict, message, {
    issues: [{ severity: 'error', code: status === 400 ? 'not-found' : 'conflict', details: { text: message }, diagnostics: message, expression: [path] }],
  });
}

/** Fewer searches than this a half: searchPages reads them in one statement (a second costs more than it saves). */
const SEARCHES_APART = 6;

/**
 * The positions of `searches` in two groups of about as many searches each, a resource type's searches in one group
 * (they share their walk of the patient's resources of that type: pagesStatement), the types with most first.
 */
function halvesByType(searches: PatientSearch[]): [number[], number[]] {
  const byType = new Map<string, number[]>();
  searches.forEach(({ type }, i) => byType.set(type, [...(byType.get(type) ?? []), i]));
  const halves: [number[], number[]] = [[], []];
  for (const positions of [...byType.values()].sort((a, b) => b.length - a.length)) {
    halves[halves[0].length <= halves[1].length ? 0 : 1].push(...positions);
  }
  return halves;
}
