import type { EventEnvelope } from '../events/outbox';

/** Keys of `data` that are identifiers (`id`, `*_id`): what a metadata-only delivery keeps. */
const IDENTIFIER_KEY = /(^|_)id$/;

/**
 * The envelope a subscription receives. By default deliveries carry metadata only: `data` keeps
 * its identifiers (e.g. `health_id`, `lab_result_id`, `facility_id`) and drops everything else,
 * so clinical content is fetched through the consent-checked API. An operator can enable the full
 * `data` per subscription (`pont webhooks full-payload ID on`).
 */
export function deliveredEnvelope(envelope: EventEnvelope, fullPayload: boolean): EventEnvelope {
  if (fullPayload) return envelope;
  const data = Object.fromEntries(Object.entries(envelope.data).filter(([key]) => IDENTIFIER_KEY.test(key)));
  return { ...envelope, data };
}
