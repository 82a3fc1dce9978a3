-- Blood-bank stock per line (src/inventory/blood.ts): for each facility, group and component, the available units
-- not expired at the clock's time `as_of`, and those of them expiring within 7 days of it. A trigger keeps the
-- counts in step with every change to blood_units, in its transaction; a job moves the clock to the present every
-- minute (counting the units that expired or came within 7 days meanwhile). An answer is these counts corrected for
-- the units whose expiry lies between the clock and now: exact, and a few rows per line whatever the stock.
CREATE TABLE blood_stock_clock (
  one   boolean     PRIMARY KEY DEFAULT true CHECK (one),
  as_of timestamptz NOT NULL
);
INSERT INTO blood_stock_clock (as_of) VALUES (now());

CREATE TABLE blood_stock (
  facility_id text        NOT NULL,
  blood_group text        NOT NULL,
  component   text        NOT NULL,
  available   bigint      NOT NULL,   -- available units with expires_at > as_of
  expiring    bigint      NOT NULL,   -- of those, expires_at <= as_of + 7 days (src/inventory/blood.ts EXPIRING_DAYS)
  recorded    bigint      NOT NULL,   -- units of the line in blood_units, whatever their status: a line is shown while > 0
  updated_at  timestamptz NOT NULL,   -- the last change to a unit of the line
  PRIMARY KEY (facility_id, blood_group, component)
);

-- Statement triggers with transition tables: a statement that writes many units (a Bridge batch, a bulk load)
-- updates each line once, in line order. The changes are the new rows counted in and the old ones counted out;
-- each trigger has only its own transition tables, so the statement is put together for the one at hand.
CREATE FUNCTION pont_blood_stock() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  t timestamptz;
  changes text := CASE TG_OP
    WHEN 'INSERT' THEN 'SELECT 1 AS sign, facility_id, blood_group, component, available, units, expires_at, updated_at FROM new_rows'
    WHEN 'UPDATE' THEN 'SELECT 1 AS sign, facility_id, blood_group, component, available, units, expires_at, updated_at FROM new_rows UNION ALL SELECT -1 AS sign, facility_id, blood_group, component, available, units, expires_at, now() AS updated_at FROM old_rows'
    ELSE 'SELECT -1 AS sign, facility_id, blood_group, component, available, units, expires_at, now() AS updated_at FROM old_rows' END;
BEGIN
  -- Shared: a clock move waits for the writes counted against the old time (and they for it).
  SELECT as_of INTO t FROM blood_stock_clock FOR SHARE;
  EXECUTE format($sql$
    INSERT INTO blood_stock AS s (facility_id, blood_group, component, available, expiring, recorded, updated_at)
    SELECT facility_id, blood_group, component,
           coalesce(sum(sign * units) FILTER (WHERE available AND expires_at > $1), 0),
           coalesce(sum(sign * units) FILTER (WHERE available AND expires_at > $1 AND expires_at <= $1 + interval '7 days'), 0),
           sum(sign),
           max(updated_at)
      FROM (%s) AS c
     GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
    ON CONFLICT (facility_id, blood_group, component)
      DO UPDATE SET available = s.available + EXCLUDED.available, expiring = s.expiring + EXCLUDED.expiring,
                    recorded = s.recorded + EXCLUDED.recorded, updated_at = greatest(s.updated_at, EXCLUDED.updated_at)
  $sql$, changes) USING t;
  RETURN NULL;
END
$$;
CREATE TRIGGER blood_units_stock_insert AFTER INSERT ON blood_units REFERENCING NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION pont_blood_stock();
CREATE TRIGGER blood_units_stock_update AFTER UPDATE ON blood_units REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
  FOR EACH STATEMENT EXECUTE FUNCTION pont_blood_stock();
CREATE TRIGGER blood_units_stock_delete AFTER DELETE ON blood_units REFERENCING OLD TABLE AS old_rows
  FOR EACH STATEMENT EXECUTE FUNCTION pont_blood_stock();

INSERT INTO blood_stock (facility_id, blood_group, component, available, expiring, recorded, updated_at)
SELECT facility_id, blood_group, component,
       coalesce(sum(units) FILTER (WHERE available AND expires_at > c.as_of), 0),
       coalesce(sum(units) FILTER (WHERE available AND expires_at > c.as_of AND expires_at <= c.as_of + interval '7 days'), 0),
       count(*),
       max(updated_at)
  FROM blood_units, blood_stock_clock c
 GROUP BY 1, 2, 3;

-- The units an answer or a clock move reads itself: available ones, by expiry.
DROP INDEX blood_units_stock;
CREATE INDEX blood_units_expiry ON blood_units (expires_at) INCLUDE (facility_id, blood_group, component, units) WHERE available;
