-- Health ID registry: one row per issued Health ID. The primary key makes issuing collision-safe
-- (a random candidate already taken is simply retried); match_key makes resolve-by-demographics
-- idempotent: concurrent identical requests race on its unique index and exactly one creates the patient.
CREATE TABLE health_ids (
  health_id    text        PRIMARY KEY,
  country_code text        NOT NULL,
  -- FHIR Patient id; filled in the same transaction that reserves the ID, so never NULL once committed.
  patient_id   text        UNIQUE,
  -- SHA-256 of the normalised demographics (see src/patients/matching.ts): no readable personal data here.
  match_key    text        UNIQUE,
  created_at   timestamptz NOT NULL DEFAULT now()
);
