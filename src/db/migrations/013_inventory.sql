-- Blood-bank inventory (issue 11): one row per BiologicallyDerivedProduct that is a blood-bank unit
-- (mappings/blood-unit.map.yaml), kept in step by every write in its transaction; the inventory is an
-- aggregate over it.
CREATE TABLE blood_units (
  unit_id     text        PRIMARY KEY,
  facility_id text        NOT NULL,
  blood_group text        NOT NULL,
  component   text        NOT NULL,
  available   boolean     NOT NULL,
  units       integer     NOT NULL,
  expires_at  timestamptz NOT NULL,
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX blood_units_stock ON blood_units (facility_id, blood_group, component) INCLUDE (available, units, expires_at, updated_at);

-- Payments (issue 11): one row per PaymentReconciliation that records a facility's payment
-- (mappings/payment.map.yaml), for the day's reconciliation.
CREATE TABLE payments (
  payment_id   text          PRIMARY KEY,
  facility_id  text          NOT NULL,
  paid_at      timestamptz   NOT NULL,
  method       text          NOT NULL,
  amount       numeric(18,4) NOT NULL,
  currency     text          NOT NULL,
  amount_due   numeric(18,4),
  currency_due text,
  reference    text,
  payer        text,
  status       text          NOT NULL,
  updated_at   timestamptz   NOT NULL DEFAULT now()
);
CREATE INDEX payments_paid_at ON payments (paid_at);
CREATE INDEX payments_facility ON payments (facility_id, paid_at);

-- Pharmacy stock (issue 11): one row per Medication that is a facility's stock (mappings/pharmacy-stock.map.yaml):
-- a batch of a stock line, or the whole line when the facility does not track lots.
CREATE TABLE pharmacy_stock (
  medication_id text          PRIMARY KEY,
  facility_id   text          NOT NULL,
  code_system   text          NOT NULL,
  code          text          NOT NULL,
  display       text,
  lot           text,
  expires_on    date,
  quantity      numeric(18,4) NOT NULL,
  unit          text,
  reorder_level numeric(18,4),
  updated_at    timestamptz   NOT NULL DEFAULT now()
);
CREATE INDEX pharmacy_stock_line ON pharmacy_stock (facility_id, code_system, code);
