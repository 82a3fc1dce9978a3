-- Bulk export (issue 43): the purpose of use the kick-off stated (X-Purpose-Of-Use). The export reads under it, as
-- every other door does (only consents of that purpose count), and its reads are counted and audited with it.
-- Null: none stated (and every export queued before this migration).
ALTER TABLE bulk_export_jobs ADD COLUMN purpose text;
