-- Transactional outbox: a domain event is a row written in the same transaction as its change.
CREATE TABLE events (
  seq             bigserial   UNIQUE,
  id              text        PRIMARY KEY,   -- evt_…
  type            text        NOT NULL,
  version         text        NOT NULL,
  created_at      timestamptz NOT NULL,
  data            jsonb       NOT NULL,
  meta            jsonb       NOT NULL,      -- organization_id, facility_id, environment, request_id
  organization_id text,                      -- organisation whose action caused it
  patient_id      text                       -- FHIR Patient id, for events about a patient
);
CREATE INDEX events_patient ON events (patient_id) WHERE patient_id IS NOT NULL;
