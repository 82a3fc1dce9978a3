import { createHmac, timingSafeEqual } from 'node:crypto';
import { WebhookSignatureError } from './errors.js';
/** Seconds a signature's timestamp may be from now, either way (interface §6.3). */
export const DEFAULT_TOLERANCE = 300;
/**
 * Checks `X-Service-Signature` (`t=<unix>,v1=<hex>`) over the raw body bytes, in constant time: true, or
 * WebhookSignatureError for a bad, missing, stale or future signature. Needs no client, token or network.
 * `now` (Unix seconds) is for tests.
 */
export function verifySignature(rawBody, signatureHeader, secret, tolerance = DEFAULT_TOLERANCE, now) {
    if (!signatureHeader)
        throw new WebhookSignatureError('Missing X-Service-Signature header');
    let timestamp;
    const signatures = [];
    for (const part of signatureHeader.split(',')) {
        const [k, v] = part.split('=', 2).map((s) => s.trim());
        if (k === 't')
            timestamp = v;
        else if (k === 'v1' && v)
            signatures.push(v);
    }
    if (!timestamp || !/^\d+$/.test(timestamp) || !signatures.length)
        throw new WebhookSignatureError('Malformed X-Service-Signature header');
    const current = now ?? Math.floor(Date.now() / 1000);
    if (Math.abs(current - Number(timestamp)) > tolerance)
        throw new WebhookSignatureError('Signature timestamp outside the tolerance (stale, replayed or from the future)');
    const body = typeof rawBody === 'string' ? Buffer.from(rawBody, 'utf8') : Buffer.from(rawBody);
    const expected = createHmac('sha256', secret).update(`${timestamp}.`).update(body).digest();
    const matches = signatures.some((s) => /^[0-9a-f]{64}$/.test(s) && timingSafeEqual(Buffer.from(s, 'hex'), expected));
    if (!matches)
        throw new WebhookSignatureError('Signature does not match the body');
    return true;
}
/** Verifies, then returns the event envelope (interface §6.2). */
export function parseEvent(rawBody, signatureHeader, secret, tolerance = DEFAULT_TOLERANCE, now) {
    verifySignature(rawBody, signatureHeader, secret, tolerance, now);
    const text = typeof rawBody === 'string' ? rawBody : Buffer.from(rawBody).toString('utf8');
    try {
        return JSON.parse(text);
    }
    catch {
        throw new WebhookSignatureError('The signed body is not JSON');
    }
}
