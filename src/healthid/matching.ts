import { createHmac } from 'node:crypto';
import { normaliseName } from '../core/normalise';

/** The demographics a resolve request matches on. */
export interface MatchDemographics {
  first_name: string;
  last_name?: string;
  date_of_birth?: string;
  sex?: string;
}


/**
 * Version of the rule below; a change of rule gets a new version so old keys are never compared with
 * new ones, and the stored ones are made again at start (src/fhir/store/backfill.ts): v1 was a bare SHA-256; v2 is
 * keyed; v3 reads a stored name given only as text by its first and last words (mappings/patient-profile.map.yaml),
 * where v2 gave such a patient no key, so that resolve created a second Health ID for them.
 */
export const MATCH_RULE_VERSION = 3;

/**
 * The match rule: two resolve requests are the same person when their normalised first name,
 * normalised last name, date of birth and sex are all equal; a field left out counts as empty,
 * so it matches only another request that also left it out. Exact and deterministic: no fuzzy
 * scores, no order swapping, nothing that could merge two people because they look alike.
 * Stored as an HMAC-SHA256 under the server's match-key secret (PONT_MATCH_KEY_SECRET): a bare hash
 * of a name and a birth date can be reversed by trying every name and date, a keyed one cannot
 * without the secret.
 */
export function matchKey(person: MatchDemographics, secret: Buffer): string {
  const parts = [
    `v${MATCH_RULE_VERSION}`,
    normaliseName(person.first_name),
    normaliseName(person.last_name ?? ''),
    person.date_of_birth ?? '',
    person.sex ?? '',
  ];
  return createHmac('sha256', secret).update(JSON.stringify(parts)).digest('hex');
}
