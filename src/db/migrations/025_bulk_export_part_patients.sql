-- A bulk export file is not served once a consent of a patient in it changed after it was written (README "Bulk Data
-- export", Expiry): each part keeps the patients whose data it holds and when it was written.
ALTER TABLE bulk_export_parts ADD COLUMN patients text[] NOT NULL DEFAULT '{}';
ALTER TABLE bulk_export_parts ADD COLUMN written_at timestamptz NOT NULL DEFAULT now();
