-- Bulk export files move out of the database into the export directory (PONT_BULK_EXPORT_DIR, src/bulk/files.ts):
-- writing each 8 MiB part as a bytea (its TOAST rows and their WAL) cost more database CPU than reading the
-- resources, and every download read it back through the database. A part's row now says how long its file is.
-- The exports in progress or finished have their files in the rows being dropped: they end as failed, with the
-- reason on their status URL, and expire as any failed export does.
UPDATE bulk_export_jobs SET status = 'failed', error = 'Pont was upgraded while this export was kept: start the export again',
  finished_at = now(), expires_at = COALESCE(expires_at, now() + interval '1 day')
  WHERE status IN ('running', 'completed');
DELETE FROM bulk_export_parts;
ALTER TABLE bulk_export_parts DROP COLUMN body;
ALTER TABLE bulk_export_parts ADD COLUMN bytes bigint NOT NULL;

-- What withholds a file (README "Bulk Data export", Expiry): every change of a consent (granted, changed, revoked,
-- deleted) made by a transaction the file's reads did not see. A timestamp cannot say that: a consent change that
-- began before a file's transaction and committed after its reads has an earlier time and was not seen. So each
-- change is kept with its transaction id, each file with the snapshot of its first read, and the question is
-- "not visible in that snapshot" (pg_visible_in_snapshot). Rows go once every file written before them is gone.
CREATE TABLE consent_changes (
  organization_id text        NOT NULL,
  patient_id      text        NOT NULL,
  changed_xid     xid8        NOT NULL DEFAULT pg_current_xact_id(),
  changed_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX consent_changes_org_patient ON consent_changes (organization_id, patient_id);
CREATE INDEX consent_changes_changed_at ON consent_changes (changed_at);
ALTER TABLE bulk_export_parts ADD COLUMN snapshot pg_snapshot NOT NULL;
