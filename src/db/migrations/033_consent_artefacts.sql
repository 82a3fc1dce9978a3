-- Consent artefacts (issue 43): the facts of a consent the access policy reads besides its classes and period, kept
-- in step with the FHIR Consent by its index (src/consents/record.ts). A consent made before has the defaults: care
-- management, every type of its classes (resource_types NULL), no date range, its own expiry.
ALTER TABLE consent_access
  ADD COLUMN purpose_of_use  text NOT NULL DEFAULT 'CAREMGT', -- provision.purpose (v3 ActReason)
  ADD COLUMN resource_types  text[],                          -- the FHIR types of its hi_types (mappings/tables/hi-types.yaml); NULL: every type of its classes
  ADD COLUMN data_from       text,                            -- provision.dataPeriod.start, YYYY-MM-DD (compared as text with a resource's care date)
  ADD COLUMN data_to         text,                            -- provision.dataPeriod.end, YYYY-MM-DD
  ADD COLUMN erase_at        timestamptz,                     -- when the receiver must have deleted its copies
  ADD COLUMN frequency_count integer,                         -- at most this many fetches …
  ADD COLUMN frequency_unit  text,                            -- … per hour | day | week | month | year
  ADD COLUMN revoked_at      timestamptz;                     -- when it became inactive (the revocation list)

-- The rule's lookup reads every fact from the index, without visiting the table.
DROP INDEX consent_access_rule;
CREATE INDEX consent_access_rule ON consent_access (organization_id, patient_id)
  INCLUDE (status, granted_at, expires_at, classes, resource_types, data_from, data_to, purpose_of_use, frequency_count);
CREATE INDEX consent_access_revoked ON consent_access (organization_id, revoked_at) WHERE revoked_at IS NOT NULL;

-- Fetches counted per consent and window (frequency): one row per window, incremented atomically.
CREATE TABLE consent_fetches (
  consent_id   text        NOT NULL,
  window_start timestamptz NOT NULL,
  fetches      integer     NOT NULL,
  PRIMARY KEY (consent_id, window_start)
);

-- The notices a consent is due (consent.expired at expires_at, consent.erase_due at erase_at): one job claims the due
-- ones across processes (FOR UPDATE SKIP LOCKED) and fires each once.
CREATE TABLE consent_notices (
  consent_id text        NOT NULL,
  kind       text        NOT NULL CHECK (kind IN ('expired', 'erase_due')),
  due_at     timestamptz NOT NULL,
  fired_at   timestamptz,
  PRIMARY KEY (consent_id, kind)
);
CREATE INDEX consent_notices_due ON consent_notices (due_at) WHERE fired_at IS NULL;

-- Existing active consents: their expiry is due; those already past were never announced and are not now.
INSERT INTO consent_notices (consent_id, kind, due_at, fired_at)
  SELECT consent_id, 'expired', expires_at, CASE WHEN expires_at <= now() THEN now() END
  FROM consent_access WHERE status = 'active' AND expires_at IS NOT NULL;
