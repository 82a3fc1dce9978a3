import type { EventEnvelope } from '../events/outbox';
import { eventDeclaration } from '../events/types';

/** Keys of `data` that are identifiers (`id`, `*_id`): what a metadata-only delivery keeps. */
const IDENTIFIER_KEY = /(^|_)id$/;

/**
 * The envelope a subscription receives. By default deliveries carry metadata only: `data` keeps
 * its identifiers (e.g. `health_id`, `lab_result_id`, `facility_id`), and the fields §6.2 publishes for its
 * type (`published`, declared with the type in src/events/types.ts; `lab_result.released`: also `test_name` and
 * `flagged`), and drops everything else, so clinical content is fetched through the consent-checked API. An operator can enable the full
 * `data` per subscription (`pont webhooks full-payload ID on`).
 */
export function deliveredEnvelope(envelope: EventEnvelope, fullPayload: boolean): EventEnvelope {
  if (fullPayload) return envelope;
  const published: readonly string[] = eventDeclaration(envelope.type)?.published ?? [];
  const data = Object.fromEntries(Object.entries(envelope.data).filter(([key]) => IDENTIFIER_KEY.test(key) || published.includes(key)));
  return { ...envelope, data };
}
