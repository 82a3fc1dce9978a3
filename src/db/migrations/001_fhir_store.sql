-- FHIR store: one row per resource (current version) and its earlier versions.
-- `rid` is the internal key every search-index row points at (compact, and stable across updates).
CREATE TABLE fhir_resources (
  rid           bigserial PRIMARY KEY,
  resource_type text        NOT NULL,
  id            text        NOT NULL,
  version_id    bigint      NOT NULL,
  last_updated  timestamptz NOT NULL,
  method        text        NOT NULL CHECK (method IN ('POST', 'PUT', 'DELETE')), -- how this version was made
  deleted       boolean     NOT NULL DEFAULT false,
  content       jsonb,      -- NULL once deleted
  UNIQUE (resource_type, id)
);
CREATE INDEX fhir_resources_type_updated ON fhir_resources (resource_type, last_updated);

-- Earlier versions only (the current one is in fhir_resources): history without doubling storage.
CREATE TABLE fhir_resource_versions (
  rid          bigint      NOT NULL REFERENCES fhir_resources (rid),
  version_id   bigint      NOT NULL,
  last_updated timestamptz NOT NULL,
  method       text        NOT NULL CHECK (method IN ('POST', 'PUT', 'DELETE')),
  content      jsonb,      -- NULL for a delete
  PRIMARY KEY (rid, version_id)
);
CREATE INDEX fhir_resource_versions_updated ON fhir_resource_versions (last_updated);

-- Search index: one table per SearchParameter type, shared by every resource type and parameter.
-- hash_identity = H(resource type, parameter); the value hashes add the searched value, so one
-- compact bigint index answers an equality search for any parameter (custom ones included).
CREATE TABLE fhir_idx_token (
  rid            bigint NOT NULL,
  hash_identity  bigint NOT NULL,
  hash_value     bigint NOT NULL,  -- H(type, param, code)
  hash_sys_value bigint NOT NULL,  -- H(type, param, system, code)
  system         text,
  value          text,
  display        text              -- normalised display text, for :text
);
CREATE INDEX fhir_idx_token_value ON fhir_idx_token (hash_value, rid);
CREATE INDEX fhir_idx_token_sys_value ON fhir_idx_token (hash_sys_value, rid);
CREATE INDEX fhir_idx_token_rid ON fhir_idx_token (rid, hash_identity);

CREATE TABLE fhir_idx_string (
  rid           bigint NOT NULL,
  hash_identity bigint NOT NULL,
  hash_exact    bigint NOT NULL,   -- H(type, param, exact value)
  value_norm    text   NOT NULL    -- lower case, accents removed: default (starts-with) and :contains
);
CREATE INDEX fhir_idx_string_norm ON fhir_idx_string (hash_identity, value_norm text_pattern_ops);
CREATE INDEX fhir_idx_string_exact ON fhir_idx_string (hash_exact);
CREATE INDEX fhir_idx_string_rid ON fhir_idx_string (rid, hash_identity);

-- Dates as the instant range they cover (a day covers 00:00 to 23:59:59.999).
CREATE TABLE fhir_idx_date (
  rid           bigint      NOT NULL,
  hash_identity bigint      NOT NULL,
  low           timestamptz NOT NULL,
  high          timestamptz NOT NULL
);
CREATE INDEX fhir_idx_date_low ON fhir_idx_date (hash_identity, low);
CREATE INDEX fhir_idx_date_high ON fhir_idx_date (hash_identity, high);
CREATE INDEX fhir_idx_date_rid ON fhir_idx_date (rid, hash_identity);

CREATE TABLE fhir_idx_number (
  rid           bigint  NOT NULL,
  hash_identity bigint  NOT NULL,
  low           numeric NOT NULL,
  high          numeric NOT NULL
);
CREATE INDEX fhir_idx_number_low ON fhir_idx_number (hash_identity, low);
CREATE INDEX fhir_idx_number_rid ON fhir_idx_number (rid, hash_identity);

CREATE TABLE fhir_idx_quantity (
  rid           bigint  NOT NULL,
  hash_identity bigint  NOT NULL,
  value         numeric NOT NULL,
  system        text,
  code          text,
  unit          text
);
CREATE INDEX fhir_idx_quantity_value ON fhir_idx_quantity (hash_identity, value);
CREATE INDEX fhir_idx_quantity_rid ON fhir_idx_quantity (rid, hash_identity);

-- References as (target type, target id); absolute URLs outside this server keep target_type ''.
CREATE TABLE fhir_idx_reference (
  rid           bigint NOT NULL,
  hash_identity bigint NOT NULL,
  target_type   text   NOT NULL,
  target_id     text   NOT NULL
);
CREATE INDEX fhir_idx_reference_target ON fhir_idx_reference (hash_identity, target_id);
CREATE INDEX fhir_idx_reference_by_target ON fhir_idx_reference (target_id, target_type);
CREATE INDEX fhir_idx_reference_rid ON fhir_idx_reference (rid, hash_identity);

CREATE TABLE fhir_idx_uri (
  rid           bigint NOT NULL,
  hash_identity bigint NOT NULL,
  value         text   NOT NULL
);
CREATE INDEX fhir_idx_uri_value ON fhir_idx_uri (hash_identity, value text_pattern_ops);
CREATE INDEX fhir_idx_uri_rid ON fhir_idx_uri (rid, hash_identity);
