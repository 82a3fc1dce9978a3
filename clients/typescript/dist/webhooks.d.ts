/** The envelope of a delivery (interface §6.2). */
export interface WebhookEvent {
    id: string;
    type: string;
    version: string;
    created_at: string;
    data: Record<string, unknown>;
    meta: {
        organization_id: string | null;
        facility_id: string | null;
        environment: string;
        request_id: string | null;
    };
}
/** Seconds a signature's timestamp may be from now, either way (interface §6.3). */
export declare const DEFAULT_TOLERANCE = 300;
/**
 * Checks `X-Service-Signature` (`t=<unix>,v1=<hex>`) over the raw body bytes, in constant time: true, or
 * WebhookSignatureError for a bad, missing, stale or future signature. Needs no client, token or network.
 * `now` (Unix seconds) is for tests.
 */
export declare function verifySignature(rawBody: string | Uint8Array, signatureHeader: string | null | undefined, secret: string, tolerance?: number, now?: number): true;
/** Verifies, then returns the event envelope (interface §6.2). */
export declare function parseEvent(rawBody: string | Uint8Array, signatureHeader: string | null | undefined, secret: string, tolerance?: number, now?: number): WebhookEvent;
