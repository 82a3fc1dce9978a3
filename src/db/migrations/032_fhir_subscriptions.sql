-- FHIR Subscriptions (R5 Backport IG STU 1.1, issue 44): topic-based subscriptions a FHIR client makes, their numbered
-- notification events, and their rest-hook notifications as deliveries in webhook_deliveries (same worker, signing,
-- retries and attempt log as webhooks).

CREATE TABLE fhir_subscriptions (
  id                      text        PRIMARY KEY,            -- the Subscription's FHIR id
  organization_id         text        NOT NULL,               -- owner: only its clients read, delete or catch up
  client_id               text        NOT NULL,               -- who made it: its scopes decide what it may be told
  scopes                  text[]      NOT NULL,
  topic_id                text        NOT NULL,               -- mappings/subscriptions/topics.yaml
  filters                 jsonb       NOT NULL DEFAULT '[]',  -- [{name, value}] from the _criteria filter extensions
  channel_type            text        NOT NULL CHECK (channel_type IN ('rest-hook', 'websocket')),
  endpoint                text,                               -- rest-hook: where notifications are POSTed
  content                 text        NOT NULL CHECK (content IN ('empty', 'id-only', 'full-resource')),
  heartbeat_seconds       integer,
  timeout_seconds         integer,
  max_count               integer,
  status                  text        NOT NULL CHECK (status IN ('requested', 'active', 'error', 'off')),
  resource                jsonb       NOT NULL,               -- the Subscription as accepted (without status)
  events_since_start      bigint      NOT NULL DEFAULT 0,     -- the last event number given: numbers are 1..this, no gaps
  webhook_subscription_id text        REFERENCES webhook_subscriptions (id), -- rest-hook: the row its deliveries name (secret)
  last_sent_at            timestamptz,                        -- the last notification queued (heartbeats count from it)
  error                   text,
  created_at              timestamptz NOT NULL DEFAULT now(),
  deleted_at              timestamptz
);
CREATE INDEX fhir_subscriptions_topic ON fhir_subscriptions (topic_id) WHERE deleted_at IS NULL AND status IN ('requested', 'active');
CREATE INDEX fhir_subscriptions_owner ON fhir_subscriptions (organization_id) WHERE deleted_at IS NULL;

-- One row per event a subscription was told of, numbered in the write's transaction ($events reads them back).
CREATE TABLE fhir_subscription_events (
  subscription_id text        NOT NULL REFERENCES fhir_subscriptions (id),
  event_number    bigint      NOT NULL,
  focus_type      text        NOT NULL,
  focus_id        text        NOT NULL,
  focus_version   text,
  interaction     text        NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (subscription_id, event_number)
);
CREATE INDEX fhir_subscription_events_created ON fhir_subscription_events (created_at);

-- A rest-hook notification is a delivery with no outbox event of its own: it names the subscription and what it carries.
ALTER TABLE webhook_deliveries ALTER COLUMN event_id DROP NOT NULL;
ALTER TABLE webhook_deliveries ALTER COLUMN event_created_at DROP NOT NULL;
ALTER TABLE webhook_deliveries ADD COLUMN fhir_subscription_id text REFERENCES fhir_subscriptions (id);
ALTER TABLE webhook_deliveries ADD COLUMN notification_type text CHECK (notification_type IN ('handshake', 'heartbeat', 'event-notification'));
ALTER TABLE webhook_deliveries ADD COLUMN event_number bigint;
ALTER TABLE webhook_deliveries ADD CONSTRAINT webhook_deliveries_event_or_notification
  CHECK ((event_id IS NOT NULL AND fhir_subscription_id IS NULL) OR (event_id IS NULL AND fhir_subscription_id IS NOT NULL AND notification_type IS NOT NULL));
CREATE UNIQUE INDEX webhook_deliveries_fhir_event ON webhook_deliveries (fhir_subscription_id, event_number) WHERE notification_type = 'event-notification';

-- The websocket channel: one-use binding tokens, and the NOTIFY that wakes the process holding a socket.
CREATE TABLE fhir_subscription_ws_tokens (
  token           text        PRIMARY KEY,
  organization_id text        NOT NULL,
  subscription_ids text[]     NOT NULL,
  expires_at      timestamptz NOT NULL
);
