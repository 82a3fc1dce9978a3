-- The audit trail (src/audit/trail.ts): one compact, append-only row per access to patient data, written on the
-- request path (group commits for reads, the write's own transaction for writes) without FHIR validation or index
-- rows. `record` holds all that the FHIR AuditEvent of the row is built from; the columns are for queries.
-- `materialized` turns true once the row's AuditEvent (same id) is in the FHIR store, where readers find it.
CREATE TABLE audit_log (
  id              uuid        PRIMARY KEY,
  recorded        timestamptz NOT NULL,
  action          text        NOT NULL,   -- C R U D E
  outcome         text        NOT NULL,   -- success | minor-failure | serious-failure
  operation       text        NOT NULL,   -- the route's operationId
  actor           text,                   -- client id, agent:…, patient:…, system:…; NULL for anonymous callers
  organization_id text,
  patients        text[]      NOT NULL,   -- FHIR Patient ids
  purpose         text,
  request_id      text,
  record          jsonb       NOT NULL,
  materialized    boolean     NOT NULL DEFAULT false
);
CREATE INDEX audit_log_pending ON audit_log (recorded, id) WHERE NOT materialized;
