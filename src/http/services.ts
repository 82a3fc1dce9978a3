import type { Config } from '../config';
import type { Logger } from '../log';
import type { Access } from '../auth/access';
import type { BulkExports } from '../bulk/jobs';
import type { FhirService } from '../fhir/service';
import type { TerminologyService } from '../fhir/term/service';
import type { MappingHolder } from '../mapping/holder';
import type { WebhookStore } from '../webhooks/store';
import type { FhirSubscriptions } from '../subscriptions/service';

// Types only: what route modules, the portal and the demo are given. src/services.ts (composition) builds the value.

/**
 * Everything a route module or feature service needs, built once per process. No database handle: clinical and
 * facility data are reached through the request's repository (`repo`, which applies src/policy), Pont's own
 * tables through the service objects that own them (`access`, `webhooks`). test/dependencies.test.ts holds it.
 */
export interface Services {
  config: Config;
  log: Logger;
  /** The FHIR repositories: every read and write of clinical data goes through one (src/fhir/repository.ts). */
  fhir: FhirService;
  /** Authentication, rate limits, and the credential tables: clients, keys, agents, patient tokens. */
  access: Access;
  /** The webhook subscriptions and deliveries of an organisation. */
  webhooks: WebhookStore;
  /**
   * The compiled mapping files (Connect shape <-> FHIR resource), reloadable while running: `get` answers from the
   * maps pinned to the request (src/app.ts), so one request uses one version of the maps from start to end.
   */
  mappings: MappingHolder;
  /** Readiness: resolves when the database answers, throws when it does not. */
  checkDatabase(): Promise<void>;
  /** Bulk Data export jobs and their files (src/bulk). */
  bulkExports: BulkExports;
  /** FHIR Subscriptions: topics, subscriptions, their numbered events and notifications (src/subscriptions). */
  subscriptions: FhirSubscriptions;
  /** The terminology operations over the loaded code systems, value sets and concept maps (src/fhir/term). */
  terminology: TerminologyService;
}
