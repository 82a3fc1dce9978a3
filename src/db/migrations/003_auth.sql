-- Access layer: integration clients, token signing keys, bridge agents, shared rate-limit counters.

-- OAuth 2.0 integration clients. The secret is kept only as an Argon2id hash (PHC string).
CREATE TABLE oauth_clients (
  client_id       text        PRIMARY KEY,
  name            text        NOT NULL,
  organization_id text        NOT NULL,
  facility_id     text,
  scopes          text[]      NOT NULL,
  secret_hash     text        NOT NULL,
  created_at      timestamptz NOT NULL DEFAULT now(),
  revoked_at      timestamptz            -- set once; tokens of a revoked client stop working at once
);
CREATE INDEX oauth_clients_organization ON oauth_clients (organization_id);

-- RS256 signing keys. The newest key with retired_at NULL signs; a retired key stays published in the
-- JWKS until every token it signed has expired (retired_at + token lifetime).
CREATE TABLE signing_keys (
  kid         text        PRIMARY KEY,   -- RFC 7638 thumbprint of the public key
  public_jwk  jsonb       NOT NULL,
  private_pem text        NOT NULL,      -- PKCS#8
  created_at  timestamptz NOT NULL DEFAULT now(),
  retired_at  timestamptz
);
CREATE UNIQUE INDEX signing_keys_one_active ON signing_keys ((true)) WHERE retired_at IS NULL;

-- On-premises Bridge Agents of a facility; the key is kept only as its SHA-256 (hex).
CREATE TABLE bridge_agents (
  agent_id      text        PRIMARY KEY,
  facility_id   text        NOT NULL,
  key_sha256    text        NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  revoked_at    timestamptz,
  last_seen_at  timestamptz,
  last_version  text
);

-- rate-limiter-flexible's RateLimiterPostgres table (its own layout), shared by every Pont process. UNLOGGED:
-- counters need no WAL (a write per request would otherwise wait for a WAL flush); a crash only resets them.
CREATE UNLOGGED TABLE rate_limits (
  key    varchar(255) PRIMARY KEY,
  points integer      NOT NULL DEFAULT 0,
  expire bigint
);
