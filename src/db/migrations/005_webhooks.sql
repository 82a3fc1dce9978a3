-- Webhooks: subscriptions, one delivery per (event, subscription), and every attempt made.

CREATE TABLE webhook_subscriptions (
  id                text        PRIMARY KEY,            -- whsub_…
  organization_id   text        NOT NULL,               -- owner: only its events reach this endpoint
  facility_id       text,
  callback_url      text        NOT NULL,
  subscribed_events text[]      NOT NULL,
  description       text        NOT NULL DEFAULT '',
  secret_encrypted  text        NOT NULL,               -- AES-256-GCM (src/webhooks/secrets.ts); never the plain secret
  full_payload      boolean     NOT NULL DEFAULT false, -- operator switch (`pont webhooks full-payload`)
  created_at        timestamptz NOT NULL DEFAULT now(),
  deleted_at        timestamptz                         -- unsubscribed; the row stays so attempt history still resolves
);
CREATE INDEX webhook_subscriptions_active ON webhook_subscriptions (organization_id) WHERE deleted_at IS NULL;

CREATE TABLE webhook_deliveries (
  id              text        PRIMARY KEY,              -- whdlv_…
  event_id        text        NOT NULL REFERENCES events (id),
  subscription_id text        NOT NULL REFERENCES webhook_subscriptions (id),
  status          text        NOT NULL CHECK (status IN ('pending', 'delivered', 'exhausted', 'cancelled')),
  round           integer     NOT NULL DEFAULT 1,       -- 1 + number of replays
  attempts        integer     NOT NULL DEFAULT 0,       -- attempts finished in the current round
  -- While pending: when the next attempt is due. While a worker holds it (lease_token set): when
  -- the lease runs out, so a delivery whose worker died becomes due again by itself.
  next_attempt_at timestamptz,
  lease_token     text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now(),
  UNIQUE (event_id, subscription_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_subscription ON webhook_deliveries (subscription_id, status);

CREATE TABLE webhook_delivery_attempts (
  id          bigserial   PRIMARY KEY,
  delivery_id text        NOT NULL REFERENCES webhook_deliveries (id),
  round       integer     NOT NULL,
  attempt     integer     NOT NULL,                     -- 1..7 within its round
  started_at  timestamptz NOT NULL,
  duration_ms integer     NOT NULL,
  status_code integer,                                  -- the receiver's HTTP status, when it answered
  error       text,                                     -- why no 2xx: timeout, connection refused, …
  succeeded   boolean     NOT NULL
);
CREATE INDEX webhook_delivery_attempts_delivery ON webhook_delivery_attempts (delivery_id, id);
