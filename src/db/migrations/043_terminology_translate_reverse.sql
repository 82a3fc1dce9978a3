-- ConceptMap/$translate with reverse=true (docs/fhir.md "Terminology") looks elements up by their target: without
-- this index each call read every element of every loaded map.
CREATE INDEX term_concept_map_elements_target ON term_concept_map_elements (target_code, target_system);
