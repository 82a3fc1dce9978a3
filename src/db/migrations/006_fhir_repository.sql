-- The FHIR repository (architecture §9): what the access rule and referential integrity need.

-- `patients`: FHIR ids of the patients whose compartment holds the resource (a Patient is in its own;
-- empty for data about no patient, e.g. Organization). `author_org`: the organisation whose client first
-- wrote the resource (NULL for imports and other system writes). Both are filled by every write; rows
-- written before this migration (patients IS NULL) are filled at start (src/fhir/store/backfill.ts).
ALTER TABLE fhir_resources ADD COLUMN patients text[];
CREATE INDEX fhir_resources_unfilled ON fhir_resources (rid) WHERE patients IS NULL;
ALTER TABLE fhir_resources ADD COLUMN author_org text;
CREATE INDEX fhir_resources_patients ON fhir_resources USING gin (patients);
CREATE INDEX fhir_resources_author_org ON fhir_resources (author_org) WHERE author_org IS NOT NULL;

-- Every local reference of every current resource (anywhere in it, not only where a SearchParameter
-- looks), so that "is X referenced?" (delete) and "does every target exist?" (import) are indexed queries.
CREATE TABLE fhir_links (
  rid         bigint NOT NULL,
  target_type text   NOT NULL,
  target_id   text   NOT NULL,
  path        text   NOT NULL   -- where in the referring resource, e.g. Condition.subject
);
CREATE INDEX fhir_links_target ON fhir_links (target_id, target_type);
CREATE INDEX fhir_links_rid ON fhir_links (rid);

-- Match keys become HMACs under a server secret (rule v2): recomputed from the Patients at start.
ALTER TABLE health_ids ADD COLUMN match_key_version smallint NOT NULL DEFAULT 1;
