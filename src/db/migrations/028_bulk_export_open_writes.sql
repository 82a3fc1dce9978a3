-- Bulk export (issue 25): the transactions still open at an export's kick-off. A write dates its resources
-- (meta.lastUpdated) on the database's clock once its transaction has an id (src/fhir/store/writes.ts); the kick-off
-- takes transactionTime on the same clock, a millisecond before its statement, and keeps its snapshot here. Every
-- write dated at or before transactionTime had its id before that snapshot: it had committed, or it is in the
-- snapshot's list, and the export reads nothing until each of those has ended (BulkExports.claim). Without this, a
-- write committing after the export had read past it was in neither this export nor the next one `_since` its
-- transactionTime. Null for exports queued before this migration.
ALTER TABLE bulk_export_jobs ADD COLUMN open_at_kickoff pg_snapshot;
