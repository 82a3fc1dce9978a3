-- Consents that scope what they open (kinds of record or a period of care, issue 43) are as rare as those that
-- limit how often: an organisation holding none is read under its plain grants only, a shorter access rule
-- (src/policy/read-limits.ts, src/policy consentRule). Every change to such a consent is announced with its
-- organisation on the channel that already announces limits, so that it reaches every process as soon as it commits.
CREATE OR REPLACE FUNCTION pont_notify_read_limit_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND (OLD.frequency_count IS NOT NULL OR OLD.resource_types IS NOT NULL OR OLD.data_from IS NOT NULL OR OLD.data_to IS NOT NULL) THEN
    PERFORM pg_notify('pont_read_limit_changes', OLD.organization_id);
  END IF;
  IF TG_OP <> 'DELETE' AND (NEW.frequency_count IS NOT NULL OR NEW.resource_types IS NOT NULL OR NEW.data_from IS NOT NULL OR NEW.data_to IS NOT NULL) THEN
    PERFORM pg_notify('pont_read_limit_changes', NEW.organization_id);
  END IF;
  RETURN NULL;
END
$$;
CREATE INDEX consent_access_scoped ON consent_access (organization_id) WHERE resource_types IS NOT NULL OR data_from IS NOT NULL OR data_to IS NOT NULL;
