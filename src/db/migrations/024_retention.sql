-- Retention (issue 28, src/retention/): the append-only audit trail and webhook attempts become tables partitioned by
-- month, so a month past its retention is archived (the audit trail) and dropped whole. A partitioned table's primary
-- key must hold the partition key: audit_log's is (id, recorded), webhook_delivery_attempts' (id, started_at). Nothing
-- references either table, no statement upserts into them, and their ids stay unique by construction (random uuid;
-- the sequence), so no query changes. Every row lands in the DEFAULT partition here; the retention job
-- (src/retention/partitions.ts) moves each month into a partition of its own and creates the coming months ahead.
-- `events` stays one table (webhook_deliveries references its id, and it is read by id): retention deletes it by time.

ALTER TABLE audit_log RENAME TO audit_log_unpartitioned;
ALTER TABLE audit_log_unpartitioned RENAME CONSTRAINT audit_log_pkey TO audit_log_unpartitioned_pkey;
ALTER INDEX audit_log_pending RENAME TO audit_log_unpartitioned_pending;
CREATE TABLE audit_log (
  id              uuid        NOT NULL,
  recorded        timestamptz NOT NULL,
  action          text        NOT NULL,
  outcome         text        NOT NULL,
  operation       text        NOT NULL,
  actor           text,
  organization_id text,
  patients        text[]      NOT NULL,
  purpose         text,
  request_id      text,
  record          jsonb       NOT NULL,
  materialized    boolean     NOT NULL DEFAULT false,
  PRIMARY KEY (id, recorded)
) PARTITION BY RANGE (recorded);
CREATE INDEX audit_log_pending ON audit_log (recorded, id) WHERE NOT materialized;
CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;
INSERT INTO audit_log (id, recorded, action, outcome, operation, actor, organization_id, patients, purpose, request_id, record, materialized)
  SELECT id, recorded, action, outcome, operation, actor, organization_id, patients, purpose, request_id, record, materialized FROM audit_log_unpartitioned;
DROP TABLE audit_log_unpartitioned;

ALTER TABLE webhook_delivery_attempts RENAME TO webhook_delivery_attempts_unpartitioned;
ALTER TABLE webhook_delivery_attempts_unpartitioned RENAME CONSTRAINT webhook_delivery_attempts_pkey TO webhook_delivery_attempts_unpartitioned_pkey;
ALTER TABLE webhook_delivery_attempts_unpartitioned RENAME CONSTRAINT webhook_delivery_attempts_delivery_id_fkey TO webhook_delivery_attempts_unpartitioned_delivery_id_fkey;
ALTER INDEX webhook_delivery_attempts_delivery RENAME TO webhook_delivery_attempts_unpartitioned_delivery;
-- The ids go on from the same sequence: detached from the old table so that dropping it keeps the sequence.
ALTER SEQUENCE webhook_delivery_attempts_id_seq OWNED BY NONE;
CREATE TABLE webhook_delivery_attempts (
  id          bigint      NOT NULL DEFAULT nextval('webhook_delivery_attempts_id_seq'),
  delivery_id text        NOT NULL REFERENCES webhook_deliveries (id),
  round       integer     NOT NULL,
  attempt     integer     NOT NULL,
  started_at  timestamptz NOT NULL,
  duration_ms integer     NOT NULL,
  status_code integer,
  error       text,
  succeeded   boolean     NOT NULL,
  response_excerpt text,
  PRIMARY KEY (id, started_at)
) PARTITION BY RANGE (started_at);
ALTER SEQUENCE webhook_delivery_attempts_id_seq OWNED BY webhook_delivery_attempts.id;
CREATE INDEX webhook_delivery_attempts_delivery ON webhook_delivery_attempts (delivery_id, id);
CREATE TABLE webhook_delivery_attempts_default PARTITION OF webhook_delivery_attempts DEFAULT;
INSERT INTO webhook_delivery_attempts (id, delivery_id, round, attempt, started_at, duration_ms, status_code, error, succeeded, response_excerpt)
  SELECT id, delivery_id, round, attempt, started_at, duration_ms, status_code, error, succeeded, response_excerpt FROM webhook_delivery_attempts_unpartitioned;
DROP TABLE webhook_delivery_attempts_unpartitioned;

-- For the batched deletes by time (events; finished deliveries; old resource versions has its index already).
CREATE INDEX events_created ON events (created_at);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (updated_at) WHERE status <> 'pending';

-- Months of the audit trail archived (src/retention/audit-archive.ts): when the month left the database, and when an
-- operator brought its AuditEvents back from the archive (`pont audit restore`).
CREATE TABLE audit_archives (
  month       text        PRIMARY KEY,   -- YYYY-MM (UTC)
  rows        bigint      NOT NULL,
  dropped_at  timestamptz,
  restored_at timestamptz
);

-- A background job that one process at a time runs (the retention job): the claim is a lease, so a process that
-- dies holding it only delays the next run.
CREATE TABLE job_claims (
  job        text        PRIMARY KEY,
  holder     text        NOT NULL,
  expires_at timestamptz NOT NULL
);
