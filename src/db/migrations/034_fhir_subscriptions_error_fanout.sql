-- FHIR Subscriptions in `error` are still fanned out to (a later successful notification makes them active again):
-- the fan-out's index covers every subscription that is not off.
DROP INDEX fhir_subscriptions_topic;
CREATE INDEX fhir_subscriptions_topic ON fhir_subscriptions (topic_id) WHERE deleted_at IS NULL AND status <> 'off';
