-- The developer portal (issue 24, src/portal): people of an organisation sign in with e-mail and password.

-- One row per person. The password is kept only as an Argon2id hash (PHC string); NULL until it is set.
CREATE TABLE portal_users (
  id              text        PRIMARY KEY,            -- pu_…
  organization_id text        NOT NULL,
  email           text        NOT NULL UNIQUE,        -- lower case
  role            text        NOT NULL CHECK (role IN ('admin', 'developer', 'viewer')),
  password_hash   text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  invited_by      text                                -- the admin who invited (NULL: an operator's CLI)
);
CREATE INDEX portal_users_organization ON portal_users (organization_id);

-- One-time set-password links: only the token's SHA-256 is kept. Times are the portal's clock (epoch ms).
CREATE TABLE portal_password_tokens (
  token_sha256 text   PRIMARY KEY,
  user_id      text   NOT NULL REFERENCES portal_users (id),
  expires_at   bigint NOT NULL,
  used_at      bigint
);

-- Sessions, server-side: the cookie holds a random id, the table its SHA-256. A session ends at sign-out, after
-- the idle time since last_seen_at, or at expires_at (absolute), whichever comes first.
CREATE TABLE portal_sessions (
  id_sha256    text   PRIMARY KEY,
  user_id      text   NOT NULL REFERENCES portal_users (id),
  csrf_token   text   NOT NULL,                      -- synchronizer token of this session
  created_at   bigint NOT NULL,
  last_seen_at bigint NOT NULL,
  expires_at   bigint NOT NULL
);
CREATE INDEX portal_sessions_user ON portal_sessions (user_id);

-- Failed sign-ins per account (`account:<email>`) and per address (`address:<ip>`) in fixed windows.
CREATE TABLE portal_sign_in_failures (
  key          text    NOT NULL,
  window_start bigint  NOT NULL,
  count        integer NOT NULL,
  PRIMARY KEY (key, window_start)
);

-- The portal shows each delivery attempt with the first 1 KB of the receiver's answer.
ALTER TABLE webhook_delivery_attempts ADD COLUMN response_excerpt text;
-- When each client last got a token, for the portal's list. A table of its own: an update of oauth_clients would
-- make every process forget the client (migration 014's trigger).
CREATE TABLE oauth_client_usage (
  client_id    text        PRIMARY KEY,
  last_used_at timestamptz NOT NULL
);

-- The portal shows each Bridge agent's clock skew: its X-Bridge-Timestamp at the last heartbeat less server time.
ALTER TABLE bridge_agents ADD COLUMN last_clock_skew_seconds integer;
