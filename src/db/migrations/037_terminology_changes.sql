-- Every change to a loaded code system or value set (a load, a reload's switch of versions, a re-expansion, the
-- clean-up of a retired version, SQL by hand) is announced on pont_terminology_changes, so that each process's cache of
-- what the maps read of the terminology (src/fhir/term/lookup.ts: record displays, memberOf()) forgets it as the change
-- commits: `loaded` (which urls have an active version) and `cs:<url>` or `vs:<url>` (a url of over 1,900 characters, which
-- a payload cannot hold, is never cached).
CREATE FUNCTION pont_notify_terminology_change() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  prefix text := CASE WHEN TG_TABLE_NAME = 'term_code_systems' THEN 'cs:' ELSE 'vs:' END;
BEGIN
  PERFORM pg_notify('pont_terminology_changes', 'loaded');
  PERFORM pg_notify('pont_terminology_changes', prefix || left(CASE WHEN TG_OP = 'DELETE' THEN OLD.url ELSE NEW.url END, 1900));
  IF TG_OP = 'UPDATE' AND OLD.url <> NEW.url THEN
    PERFORM pg_notify('pont_terminology_changes', prefix || left(OLD.url, 1900));
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER term_code_systems_changed AFTER INSERT OR UPDATE OR DELETE ON term_code_systems
  FOR EACH ROW EXECUTE FUNCTION pont_notify_terminology_change();
CREATE TRIGGER term_value_sets_changed AFTER INSERT OR UPDATE OR DELETE ON term_value_sets
  FOR EACH ROW EXECUTE FUNCTION pont_notify_terminology_change();
