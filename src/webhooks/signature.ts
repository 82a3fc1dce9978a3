import { createHmac } from 'node:crypto';

export const SIGNATURE_HEADER = 'X-Service-Signature';

/**
 * `t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed with the UTF-8 bytes of the whole
 * `whsec_…` secret: Stripe's scheme, so Stripe's published verifiers accept our deliveries.
 */
export function signatureHeader(secret: string, rawBody: string, unixSeconds: number): string {
  const v1 = createHmac('sha256', Buffer.from(secret, 'utf8')).update(`${unixSeconds}.${rawBody}`, 'utf8').digest('hex');
  return `t=${unixSeconds},v1=${v1}`;
}
