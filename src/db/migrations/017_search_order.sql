-- Searches of one type page in rid order (keyset cursors: rid > last). This index answers "type = $1 AND rid > $2
-- ORDER BY rid LIMIT n" as a range scan, whatever the plan: without it, a plan made for any cursor (a prepared
-- statement's generic plan) read every resource of the type and sorted them (a deep page: 92 ms -> 0.3 ms at 60k).
CREATE INDEX fhir_resources_type_rid ON fhir_resources (resource_type, rid);
