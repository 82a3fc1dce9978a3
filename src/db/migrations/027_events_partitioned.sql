-- Retention (issue 28): `events` is partitioned by month like audit_log and webhook_delivery_attempts (024), so a
-- month past PONT_RETENTION_EVENTS is dropped whole rather than deleted row by row. Its primary key must hold the
-- partition key: (id, created_at). Event ids stay unique by construction (evt_ + 16 random bytes). `seq` goes on
-- from the same sequence (tests order by it) without its UNIQUE, which would have to hold created_at too.
--
-- webhook_deliveries named events(id) with a foreign key. It now carries the event's created_at as well
-- (event_created_at): its joins to events go to the one partition that holds the event, and the retention job finds
-- whether a month is still named by a delivery through an index. No foreign key replaces the old one: a key that
-- references a partitioned table forbids deleting a named row from its partition, and the job moves a month's rows
-- out of the DEFAULT partition by DELETE … INSERT. Integrity is kept instead by who deletes events: retention drops
-- a month only when no delivery names one of its events, checked after DETACH in the same transaction (the lock it
-- takes waits for a replay that read the event and queued a delivery; a later one no longer finds the event), and
-- the demo reset deletes deliveries before their events. Every delivery is inserted with its event read or written
-- in the same transaction (src/webhooks/deliveries.ts).

ALTER TABLE webhook_deliveries ADD COLUMN event_created_at timestamptz;
UPDATE webhook_deliveries d SET event_created_at = e.created_at FROM events e WHERE e.id = d.event_id;
ALTER TABLE webhook_deliveries ALTER COLUMN event_created_at SET NOT NULL;
ALTER TABLE webhook_deliveries DROP CONSTRAINT webhook_deliveries_event_id_fkey;
CREATE INDEX webhook_deliveries_event_month ON webhook_deliveries (event_created_at);

ALTER TABLE events RENAME TO events_unpartitioned;
ALTER TABLE events_unpartitioned RENAME CONSTRAINT events_pkey TO events_unpartitioned_pkey;
ALTER INDEX events_patient RENAME TO events_unpartitioned_patient;
DROP INDEX events_created; -- for the deletes by time that dropping partitions replaces
ALTER SEQUENCE events_seq_seq OWNED BY NONE;
CREATE TABLE events (
  seq             bigint      NOT NULL DEFAULT nextval('events_seq_seq'),
  id              text        NOT NULL,      -- evt_…
  type            text        NOT NULL,
  version         text        NOT NULL,
  created_at      timestamptz NOT NULL,
  data            jsonb       NOT NULL,
  meta            jsonb       NOT NULL,      -- organization_id, facility_id, environment, request_id
  organization_id text,                      -- organisation whose action caused it
  patient_id      text,                      -- FHIR Patient id, for events about a patient
  PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
ALTER SEQUENCE events_seq_seq OWNED BY events.seq;
CREATE INDEX events_patient ON events (patient_id) WHERE patient_id IS NOT NULL;
-- Every row lands here; the retention job moves each month into a partition of its own (src/retention/partitions.ts).
CREATE TABLE events_default PARTITION OF events DEFAULT;
INSERT INTO events (seq, id, type, version, created_at, data, meta, organization_id, patient_id)
  SELECT seq, id, type, version, created_at, data, meta, organization_id, patient_id FROM events_unpartitioned;
DROP TABLE events_unpartitioned;
