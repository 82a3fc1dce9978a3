-- FHIR Subscriptions' fan-out leaves the write's transaction (issue 44; docs/fhir.md "Subscriptions"). A write whose
-- changes fire a topic that has a subscription queues one row per (change, topic) here, with the values of the topic's
-- filters on the resource: a constant cost per write, however many subscriptions there are. A worker in every process
-- (one at a time, by an advisory lock) takes the queue in order, matches the subscriptions set-based in SQL (topic,
-- filters, who may read), numbers their events and queues their notifications, and deletes what it numbered, all in
-- one transaction: a queued change is numbered exactly once, kill -9 or not.
CREATE TABLE fhir_subscription_changes (
  seq            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  topic_id       text        NOT NULL,
  focus_type     text        NOT NULL,
  focus_id       text        NOT NULL,
  focus_version  text,
  interaction    text        NOT NULL,
  filter_values  jsonb       NOT NULL DEFAULT '{}',   -- {filter name: [values of its FHIRPath on the resource]}
  created_at     timestamptz NOT NULL DEFAULT now()  -- the write's time: the events' timestamp
);

-- The fan-out's join: the subscriptions of a topic, by subscriber (client, organisation).
DROP INDEX fhir_subscriptions_topic;
CREATE INDEX fhir_subscriptions_topic ON fhir_subscriptions (topic_id, client_id, organization_id) WHERE deleted_at IS NULL AND status <> 'off';

-- A rest-hook notification carries up to the subscription's maxCount events (backport-max-count): the numbers
-- event_number .. event_number + event_count - 1, numbered in one run of the fan-out. Null: one event.
ALTER TABLE webhook_deliveries ADD COLUMN event_count integer CHECK (event_count IS NULL OR event_count >= 1);
