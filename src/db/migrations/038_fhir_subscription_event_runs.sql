-- FHIR Subscriptions' numbered events, one row per subscription per run of the fan-out (036) instead of one per event:
-- a run that numbers k changes for 1,000 subscriptions writes 1,000 rows, not k × 1,000. A row holds the run's events
-- for its subscription, numbered first_number .. last_number without a gap, in arrays (element i is number
-- first_number + i - 1). A run numbers at most 200 changes (FANOUT_BATCH), so a row holds at most 200 events; readers
-- find the rows of a range of numbers by last_number. Retention drops whole rows by the run's time.
CREATE TABLE fhir_subscription_event_runs (
  subscription_id text          NOT NULL REFERENCES fhir_subscriptions (id),
  first_number    bigint        NOT NULL,
  last_number     bigint        NOT NULL,
  focus_types     text[]        NOT NULL,
  focus_ids       text[]        NOT NULL,
  focus_versions  text[]        NOT NULL,
  interactions    text[]        NOT NULL,
  created_ats     timestamptz[] NOT NULL,   -- each change's time (the writes')
  created_at      timestamptz   NOT NULL DEFAULT now(),
  PRIMARY KEY (subscription_id, last_number),
  CHECK (last_number = first_number + cardinality(focus_ids) - 1)
);
CREATE INDEX fhir_subscription_event_runs_created ON fhir_subscription_event_runs (created_at);

INSERT INTO fhir_subscription_event_runs (subscription_id, first_number, last_number, focus_types, focus_ids, focus_versions, interactions, created_ats, created_at)
  SELECT subscription_id, event_number, event_number, ARRAY[focus_type], ARRAY[focus_id], ARRAY[focus_version], ARRAY[interaction], ARRAY[created_at], created_at
  FROM fhir_subscription_events;
DROP TABLE fhir_subscription_events;
