-- Rotation with overlap: a client secret (src/auth/clients.ts) or a webhook signing secret (src/webhooks/subscriptions.ts)
-- is replaced while the one it replaced stays valid until previous_secret_expires_at (both NULL: no overlap). A
-- client's previous secret is an Argon2id hash like its current one; a subscription's is encrypted like its current one.
ALTER TABLE oauth_clients ADD COLUMN previous_secret_hash text, ADD COLUMN previous_secret_expires_at timestamptz;
ALTER TABLE webhook_subscriptions ADD COLUMN previous_secret_encrypted text, ADD COLUMN previous_secret_expires_at timestamptz;
