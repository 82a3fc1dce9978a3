-- Consent (issue 9). Consents themselves are FHIR Consent resources; these tables index and serve them.

-- One row per Consent resource that grants a Pont organisation access (src/consents/index.ts keeps it in
-- step with the Consent, in the same transaction, whatever wrote it). The access rule reads only this.
CREATE TABLE consent_access (
  consent_id      text        PRIMARY KEY,   -- the Consent's FHIR id
  patient_id      text        NOT NULL,      -- FHIR Patient id
  organization_id text        NOT NULL,      -- provision.actor: the organisation it is granted to
  consent_type    text        NOT NULL,
  classes         text[]      NOT NULL,      -- data classes it covers (read scopes, see src/consents/types.ts)
  status          text        NOT NULL,      -- FHIR status: proposed | active | inactive | rejected
  granted_at      timestamptz,               -- Consent.dateTime
  expires_at      timestamptz,               -- provision.period.end
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX consent_access_rule ON consent_access (organization_id, patient_id) INCLUDE (status, granted_at, expires_at, classes);
CREATE INDEX consent_access_patient ON consent_access (patient_id);

-- Break-glass: a client with emergency:access that states a reason opens a bounded window on one patient.
CREATE TABLE emergency_access (
  id              bigserial   PRIMARY KEY,
  organization_id text        NOT NULL,
  client_id       text        NOT NULL,
  patient_id      text        NOT NULL,
  reason          text        NOT NULL,
  opened_at       timestamptz NOT NULL DEFAULT now(),
  expires_at      timestamptz NOT NULL
);
CREATE INDEX emergency_access_rule ON emergency_access (organization_id, patient_id, expires_at);

-- Pairing codes a facility issues so that a patient's app can get a patient token. Only a hash is kept.
CREATE TABLE mobile_pairing_codes (
  code_hash   text        PRIMARY KEY,
  patient_id  text        NOT NULL,
  health_id   text        NOT NULL,
  issued_by   text        NOT NULL,         -- client id of the facility
  expires_at  timestamptz NOT NULL,
  attempts    integer     NOT NULL DEFAULT 0,
  used_at     timestamptz
);
CREATE INDEX mobile_pairing_codes_health_id ON mobile_pairing_codes (health_id);

-- Patient tokens (pat_…): opaque; only their SHA-256 is kept.
CREATE TABLE mobile_tokens (
  token_hash  text        PRIMARY KEY,
  patient_id  text        NOT NULL,
  health_id   text        NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  expires_at  timestamptz NOT NULL,
  revoked_at  timestamptz
);
CREATE INDEX mobile_tokens_patient ON mobile_tokens (patient_id);

-- Operator clients of the deploying institution may read every patient (pont clients create --all-patients).
ALTER TABLE oauth_clients ADD COLUMN all_patients boolean NOT NULL DEFAULT false;
