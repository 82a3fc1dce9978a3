-- Consents that limit how often their organisation reads (frequency, issue 43) are rare: a read counts itself
-- (src/policy readFacts) only when its organisation holds one. Each process keeps which organisations do
-- (src/policy/read-limits.ts); every change to such a consent is announced on pont_read_limit_changes with the
-- organisation, so that a new limit reaches every process as soon as it commits.
CREATE INDEX consent_access_limited ON consent_access (organization_id) WHERE frequency_count IS NOT NULL;

CREATE FUNCTION pont_notify_read_limit_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP <> 'INSERT' AND OLD.frequency_count IS NOT NULL THEN
    PERFORM pg_notify('pont_read_limit_changes', OLD.organization_id);
  END IF;
  IF TG_OP <> 'DELETE' AND NEW.frequency_count IS NOT NULL THEN
    PERFORM pg_notify('pont_read_limit_changes', NEW.organization_id);
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER consent_access_read_limit AFTER INSERT OR UPDATE OR DELETE ON consent_access
  FOR EACH ROW EXECUTE FUNCTION pont_notify_read_limit_change();
