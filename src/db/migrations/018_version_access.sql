-- Every version is governed by its own patients (issue 20): earlier versions keep the patients they were
-- filed under, and a deleted resource keeps those of its last version (it used to lose them, which made the
-- history of every deleted resource readable by everyone). Versions archived before this migration have no
-- patients of their own (NULL): they are judged by their resource's. Deleted resources' patients are
-- recomputed from their last version at start (src/fhir/store/backfill.ts).
ALTER TABLE fhir_resource_versions ADD COLUMN patients text[];
UPDATE fhir_resources SET patients = NULL WHERE deleted;

-- Pairing (issue 20): a patient's app token remembers which organisation paired it, so that it never
-- approves that organisation's own consent requests.
ALTER TABLE mobile_pairing_codes ADD COLUMN issued_by_org text;
ALTER TABLE mobile_tokens ADD COLUMN paired_by_org text;
