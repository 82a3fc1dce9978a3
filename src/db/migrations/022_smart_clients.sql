-- SMART Backend Services (src/auth/assertions.ts): a client authenticates either with a secret (secret_hash) or
-- with signed assertions checked against its public JWK Set, registered inline (jwks) or fetched from jwks_uri.
ALTER TABLE oauth_clients ALTER COLUMN secret_hash DROP NOT NULL, ADD COLUMN jwks jsonb, ADD COLUMN jwks_uri text;
ALTER TABLE oauth_clients ADD CONSTRAINT oauth_clients_one_credential CHECK (num_nonnulls(secret_hash, jwks, jwks_uri) = 1);

-- The jti of every accepted client assertion, until it expires: an assertion is accepted once, on any process
-- (the primary key decides between concurrent requests). Rows past expires_at are purged by a background job.
CREATE TABLE used_client_assertions (
  client_id  text        NOT NULL,
  jti        text        NOT NULL,
  expires_at timestamptz NOT NULL,
  PRIMARY KEY (client_id, jti)
);
CREATE INDEX used_client_assertions_expiry ON used_client_assertions (expires_at);
