-- Every change to a client (created, revoked, deleted, scopes changed: by the CLI, the demo reset or SQL by
-- hand) is announced on pont_client_changes with the client id, so that each process's client cache forgets
-- it the moment the change commits (src/auth/clients.ts).
CREATE FUNCTION pont_notify_client_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('pont_client_changes', CASE WHEN TG_OP = 'DELETE' THEN OLD.client_id ELSE NEW.client_id END);
  IF TG_OP = 'UPDATE' AND OLD.client_id <> NEW.client_id THEN
    PERFORM pg_notify('pont_client_changes', OLD.client_id);
  END IF;
  RETURN NULL;
END
$$;
CREATE TRIGGER oauth_clients_changed AFTER INSERT OR UPDATE OR DELETE ON oauth_clients
  FOR EACH ROW EXECUTE FUNCTION pont_notify_client_change();

-- Rate-limit counters shared by every Pont process (src/auth/rate-limits.ts): one row per key and fixed
-- window; `count` never passes the limit (processes take allowance in batches), `granted` is what the last
-- statement gave. UNLOGGED: no WAL for counters; a crash only resets them.
CREATE UNLOGGED TABLE rate_counters (
  key          text    NOT NULL,
  window_start bigint  NOT NULL,   -- epoch milliseconds
  expires_at   bigint  NOT NULL,   -- epoch milliseconds: the window's end
  count        integer NOT NULL,
  granted      integer NOT NULL,
  PRIMARY KEY (key, window_start)
);
CREATE INDEX rate_counters_expiry ON rate_counters (expires_at);
DROP TABLE rate_limits;
