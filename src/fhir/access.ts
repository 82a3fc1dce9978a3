import type { Principal } from '../auth/principal';
import { fhirReadScopes } from '../auth/scopes';
import type { RowFilter } from './store/types';

/** Where a request came in. FHIR clients are held to the FHIR scope table; Connect/SDK routes declare their own scopes. */
export type Channel = 'fhir' | 'connect' | 'sdk' | 'bridge' | 'mobile' | 'system';

/**
 * The access rule, as the repository applies it to every read (architecture §9): which resource types
 * the caller may read at all, and which rows of patient data it may see, as a SQL condition, so that
 * searches, includes, chains, counts, history and $everything all filter in the query (paging and totals
 * stay right) and point reads get the same verdict.
 */
export interface AccessPolicy {
  /** May the caller read resources of this type at all (scopes)? */
  canRead(resourceType: string): boolean;
  /** Rows the caller may see (a condition on `fhir_resources`); undefined: every row. */
  rowFilter?: RowFilter;
}

const everything: AccessPolicy = { canRead: () => true };

/** The policy of one caller on one channel. */
export function accessPolicyFor(principal: Principal, channel: Channel): AccessPolicy {
  if (principal.kind === 'system') return everything;
  if (principal.kind !== 'client' || channel !== 'fhir') return everything;
  const scopes = new Set<string>(principal.scopes);
  return { canRead: (type) => fhirReadScopes(type).some((s) => scopes.has(s)) };
}
