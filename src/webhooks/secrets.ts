import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

const FORMAT = 'v1'; // AES-256-GCM, 12-byte IV, 16-byte tag: `v1:<base64 iv|tag|ciphertext>`

/** A new webhook secret: `whsec_` + 32 random bytes (base64url). */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64url')}`;
}

/**
 * Encrypts a secret for storage (PONT_WEBHOOK_SECRET_KEY, the at-rest key: webhook secrets, and the secrets
 * in answers kept for Idempotency-Key replays). `context` (the subscription id; the idempotency key and field)
 * is authenticated data, so a ciphertext copied onto another row does not decrypt there.
 */
export function encryptSecret(key: Buffer, context: string, secret: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv);
  cipher.setAAD(Buffer.from(context, 'utf8'));
  const ciphertext = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return `${FORMAT}:${Buffer.concat([iv, cipher.getAuthTag(), ciphertext]).toString('base64')}`;
}

/** Throws when the key is wrong or the value was tampered with. */
export function decryptSecret(key: Buffer, context: string, stored: string): string {
  const [format, payload] = stored.split(':');
  if (format !== FORMAT || !payload) throw new Error('Unknown webhook secret format');
  const raw = Buffer.from(payload, 'base64');
  const decipher = createDecipheriv('aes-256-gcm', key, raw.subarray(0, 12));
  decipher.setAAD(Buffer.from(context, 'utf8'));
  decipher.setAuthTag(raw.subarray(12, 28));
  return Buffer.concat([decipher.update(raw.subarray(28)), decipher.final()]).toString('utf8');
}
