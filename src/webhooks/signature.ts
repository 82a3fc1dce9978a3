import { createHmac } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Service-Signature';

/**
 * `t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed with the UTF-8 bytes of the whole
 * `whsec_…` secret: Stripe's scheme, so Stripe's published verifiers accept our deliveries. During a
 * rotation's overlap there is one `v1` per secret, the new one first (`t=…,v1=<new>,v1=<old>`), as Stripe
 * sends during a roll: a receiver accepts the delivery when any `v1` matches its secret.
 */
export function signatureHeader(secrets: readonly string[], rawBody: string, unixSeconds: number): string {
  const v1s = secrets.map((secret) => createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${unixSeconds}.${rawBody}`, 'utf8').digest('hex'));
  return [`t=${unixSeconds}`, ...v1s.map((v1) => `v1=${v1}`)].join(',');
}
