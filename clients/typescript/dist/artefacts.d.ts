import { PontError } from './errors.js';
/** A consent artefact that does not verify: malformed, signed by no key of the set, tampered with, or expired. */
export declare class ArtefactVerificationError extends PontError {
}
/** A public JWK of Pont's key set (GET /.well-known/jwks.json). */
export interface PublicJwk {
    kty: string;
    kid?: string;
    alg?: string;
    n?: string;
    e?: string;
    [member: string]: unknown;
}
/** The verified payload of a consent artefact (docs/consent-artefacts.md). */
export interface ConsentArtefactPayload {
    consent: Record<string, unknown> & {
        consent_id: string;
    };
    iss?: string;
    sub?: string;
    iat?: number;
    exp?: number;
    [claim: string]: unknown;
}
/**
 * Verifies a consent artefact (a compact JWS, RS256) offline with Pont's public key set, and returns its payload:
 * the key is the set's key of the header's `kid`; the signature must hold over the exact bytes; an `exp` in the past
 * (the consent has expired) fails. Throws ArtefactVerificationError otherwise. `now` (Unix seconds) is for tests.
 * A valid signature says what was granted: check `GET …/consents/revoked` (consents.revoked) before relying on it.
 */
export declare function verifyConsentArtefact(jws: string, jwks: {
    keys: PublicJwk[];
}, options?: {
    now?: number;
    issuer?: string;
}): ConsentArtefactPayload;
