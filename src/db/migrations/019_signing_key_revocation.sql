-- `pont keys revoke KID` withdraws a signing key at once (src/auth/keys.ts): its tokens are refused and it
-- leaves the JWKS. Every change to a key (created, retired, revoked) is announced on pont_key_changes with its
-- kid, so that each process's key cache forgets it the moment the change commits.
ALTER TABLE signing_keys ADD COLUMN revoked_at timestamptz;

CREATE FUNCTION pont_notify_key_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('pont_key_changes', CASE WHEN TG_OP = 'DELETE' THEN OLD.kid ELSE NEW.kid END);
  IF TG_OP = 'UPDATE' AND OLD.kid <> NEW.kid THEN
    PERFORM pg_notify('pont_key_changes', OLD.kid);
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER signing_keys_changed AFTER INSERT OR UPDATE OR DELETE ON signing_keys
  FOR EACH ROW EXECUTE FUNCTION pont_notify_key_change();
