-- Bulk Data export (README "Bulk Data export", src/bulk): one row per kick-off, one task per resource type, claimed by
-- any process's worker under a lease (FOR UPDATE SKIP LOCKED, like webhook deliveries), and the output as ndjson parts
-- of bounded size: every process serves the files, the types of one export are written side by side, and a task
-- whose claimer died resumes after its last committed part.
CREATE TABLE bulk_export_jobs (
  id               text        PRIMARY KEY,           -- random and unguessable: it is in the status and file URLs
  client_id        text        NOT NULL,
  organization_id  text        NOT NULL,
  principal        jsonb       NOT NULL,              -- the caller as authenticated at kick-off (its token's scopes)
  request          text        NOT NULL,              -- the kick-off URL, echoed in the manifest
  level            text        NOT NULL CHECK (level IN ('system', 'patient', 'group')),
  members          text[],                            -- Patient and Group exports: only these patients (NULL: any)
  since            timestamptz,
  type_filters     text[]      NOT NULL DEFAULT '{}', -- `Type?search`, as given
  transaction_time timestamptz NOT NULL,
  status           text        NOT NULL CHECK (status IN ('running', 'completed', 'failed')), -- cancelled: deleted
  error            text,
  created_at       timestamptz NOT NULL,
  finished_at      timestamptz,
  expires_at       timestamptz                        -- finished jobs: when the janitor removes the job and its files
);
-- One export at a time per client (429 otherwise): a second insert conflicts.
CREATE UNIQUE INDEX bulk_export_jobs_one_active ON bulk_export_jobs (client_id) WHERE status = 'running';
CREATE INDEX bulk_export_jobs_expiry ON bulk_export_jobs (expires_at) WHERE expires_at IS NOT NULL;

-- One resource type of an export: where it resumes (the last rid written, committed with each part) and its lease.
CREATE TABLE bulk_export_tasks (
  job_id           text    NOT NULL REFERENCES bulk_export_jobs (id) ON DELETE CASCADE,
  resource_type    text    NOT NULL,
  after_rid        bigint  NOT NULL DEFAULT 0,
  exported         bigint  NOT NULL DEFAULT 0,
  done             boolean NOT NULL DEFAULT false,
  lease_token      text,
  lease_expires_at timestamptz,
  attempts         int     NOT NULL DEFAULT 0,
  PRIMARY KEY (job_id, resource_type)
);
CREATE INDEX bulk_export_tasks_due ON bulk_export_tasks (job_id) WHERE NOT done;

-- The output: each part is one file of the manifest (one resource type, at most a few MB).
CREATE TABLE bulk_export_parts (
  job_id        text   NOT NULL REFERENCES bulk_export_jobs (id) ON DELETE CASCADE,
  part          bigserial,
  resource_type text   NOT NULL,
  count         int    NOT NULL,
  body          bytea  NOT NULL,  -- the ndjson, UTF-8
  PRIMARY KEY (job_id, part)
);
-- Uncompressed: writing a part costs no compression, and a download reads each chunk (substring) without the rest.
ALTER TABLE bulk_export_parts ALTER COLUMN body SET STORAGE EXTERNAL;
