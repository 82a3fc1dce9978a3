import type { Patient } from '@medplum/fhirtypes';
import type { Config } from '../config';
import type { Database, Queryable } from '../db/database';
import type { MappingSet } from '../mapping/index';
import { matchKey } from '../healthid/matching';
import { AuditTrail } from './audit-trail';
import { FhirRepository, type DerivedTable, type RepositoryDeps, type RequestContext } from './repository';
import { PageShapes } from './store/page-shapes';
import { purgeResources, purgeResourcesById } from './store/purge';
import type { ReadLimits } from '../policy/read-limits';
import { TerminologyLookup } from './term/lookup';

export const FHIR_BASE_PATH = '/api/fhir/R4';

/**
 * What features add to the FHIR core, registered at composition (src/services.ts, `fhirExtensions`): the tables
 * derived from resources (the consent index, inventories), who a resource counts as written by, and which
 * organisations' reads are counted (the consent index tells it of the consents it writes).
 */
export type FhirExtensions = Pick<RepositoryDeps, 'derived' | 'authorOf' | 'readLimits'>;

/** Builds the repositories of one process: one per request (or per operator command). */
export class FhirService {
  private readonly deps: RepositoryDeps;
  /** The process's audit trail (src/fhir/audit-trail.ts); its materialiser runs as a background worker. */
  readonly auditTrail: AuditTrail;
  /**
   * What the process reads of the loaded terminology, cached and kept current by NOTIFY (src/fhir/term/lookup.ts): the
   * writes' check of required bindings, and the records' displays and memberOf() (TerminologyService.forReading).
   */
  readonly terminology: TerminologyLookup;
  /** The clock (ms since the epoch) of answers "as of now" and of the blood-stock clock; tests move it. */
  now: () => number = Date.now;

  constructor(
    readonly db: Database,
    config: Pick<Config, 'publicUrl' | 'environment' | 'matchKeySecret'>,
    mappings: MappingSet,
    extensions: FhirExtensions,
  ) {
    const baseUrl = () => `${config.publicUrl}${FHIR_BASE_PATH}`;
    this.auditTrail = new AuditTrail(db, baseUrl);
    this.terminology = new TerminologyLookup(db);
    this.deps = {
      db,
      auditTrail: this.auditTrail,
      baseUrl,
      environment: config.environment,
      matchKeyOf: (patient: Patient) => {
        // The same demographics resolve matches on, read through the same map (mappings/patient-profile.map.yaml).
        const profile = mappings.get('patient-profile').fromFhir(patient) as Record<string, unknown>;
        const text = (k: string) => (typeof profile[k] === 'string' ? (profile[k] as string) : undefined);
        const firstName = text('first_name');
        if (!firstName) return null;
        return matchKey({ first_name: firstName, last_name: text('last_name'), date_of_birth: text('date_of_birth'), sex: text('sex') }, config.matchKeySecret);
      },
      readAs: (map, resource, fields) => mappings.get(map).readFhir(resource, {}, fields).connect,
      // Writes refuse a code outside a loaded value set its element is bound to, required (docs/fhir.md "Terminology").
      bindings: this.terminology,
      pageShapes: new PageShapes(),
      ...extensions,
      now: () => this.now(),
    };
  }

  /** Which organisations' reads are counted (src/policy/read-limits.ts): listening while the process serves (startPont). */
  get readLimits(): ReadLimits {
    return this.deps.readLimits;
  }

  get baseUrl(): string {
    return this.deps.baseUrl();
  }

  /** The match key of a Patient's demographics, or null (src/healthid/matching.ts). */
  matchKeyOf(patient: Patient): string | null {
    return this.deps.matchKeyOf(patient);
  }

  repository(context: RequestContext): FhirRepository {
    return new FhirRepository(this.deps, context);
  }

  /** The derived tables the features registered (src/services.ts), each kept in step by every write. */
  get derived(): readonly DerivedTable[] {
    return this.deps.derived;
  }

  /**
   * Removes resources (by rid) from the store outright, with the rows every registered derived table keeps for them
   * (purgeResources): the one way to purge, so no caller lists the derived tables. Returns how many it removed.
   */
  purge(sql: Queryable, rids: string[]): Promise<number> {
    return purgeResources(sql, rids, this.deps.derived);
  }

  /** purge, for the resources of `type` with these ids (those that exist). */
  purgeById(sql: Queryable, type: string, ids: string[]): Promise<number> {
    return purgeResourcesById(sql, type, ids, this.deps.derived);
  }

  /** A repository acting as Pont itself, for operator work (`pont import`, the demo reset). */
  system(name: string): FhirRepository {
    return this.repository({ principal: { kind: 'system', name }, channel: 'system' });
  }
}
