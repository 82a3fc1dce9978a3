import type { EventEnvelope } from '../events/outbox';

/** Keys of `data` that are identifiers (`id`, `*_id`): what a metadata-only delivery keeps. */
const IDENTIFIER_KEY = /(^|_)id$/;

/** Fields the published interface (§6.2) lists for an event type: delivered whatever the payload setting. */
const PUBLISHED_FIELDS: Partial<Record<string, readonly string[]>> = {
  'lab_result.released': ['health_id', 'lab_result_id', 'test_name', 'flagged', 'facility_id'],
  // How many items of the batch failed holds no patient data; the errors may (they quote the resources).
  'bridge_agent.sync_failed': ['agent_id', 'facility_id', 'batch_id', 'counts'],
};

/**
 * The envelope a subscription receives. By default deliveries carry metadata only: `data` keeps
 * its identifiers (e.g. `health_id`, `lab_result_id`, `facility_id`), and the fields §6.2 publishes for its
 * type (`lab_result.released`: also `test_name` and `flagged`), and drops everything else,
 * so clinical content is fetched through the consent-checked API. An operator can enable the full
 * `data` per subscription (`pont webhooks full-payload ID on`).
 */
export function deliveredEnvelope(envelope: EventEnvelope, fullPayload: boolean): EventEnvelope {
  if (fullPayload) return envelope;
  const published = PUBLISHED_FIELDS[envelope.type] ?? [];
  const data = Object.fromEntries(Object.entries(envelope.data).filter(([key]) => IDENTIFIER_KEY.test(key) || published.includes(key)));
  return { ...envelope, data };
}
