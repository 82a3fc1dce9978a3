-- Idempotency (issue 10): the answer to a creating POST, kept per client and Idempotency-Key. Written in the
-- same transaction as the change, so a key exists exactly when its change does.
CREATE TABLE idempotency_keys (
  client_id    text        NOT NULL,
  key          text        NOT NULL,
  request_hash text        NOT NULL,   -- SHA-256 of method, path and JSON body
  status       integer     NOT NULL,
  body         jsonb,
  headers      jsonb       NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (client_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
