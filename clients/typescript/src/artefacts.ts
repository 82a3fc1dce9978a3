import { createPublicKey, verify } from 'node:crypto';
import { PontError } from './errors.js';

/** A consent artefact that does not verify: malformed, signed by no key of the set, tampered with, or expired. */
export class ArtefactVerificationError extends PontError {}

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
  consent: Record<string, unknown> & { consent_id: string };
  iss?: string;
  sub?: string;
  iat?: number;
  exp?: number;
  [claim: string]: unknown;
}

const decode = (part: string) => Buffer.from(part, 'base64url');

/**
 * Verifies a consent artefact (a compact JWS, RS256) offline with Pont's public key set, and returns its payload:
 * the key is the set's key of the header's `kid`; the signature must hold over the exact bytes; an `exp` in the past
 * (the consent has expired) fails. Throws ArtefactVerificationError otherwise. `now` (Unix seconds) is for tests.
 * A valid signature says what was granted: check `GET …/consents/revoked` (consents.revoked) before relying on it.
 */
export function verifyConsentArtefact(jws: string, jwks: { keys: PublicJwk[] }, options: { now?: number; issuer?: string } = {}): ConsentArtefactPayload {
  const parts = typeof jws === 'string' ? jws.split('.') : [];
  if (parts.length !== 3 || parts.some((p) => !/^[A-Za-z0-9_-]*$/.test(p))) throw new ArtefactVerificationError('Not a compact JWS');
  let header: { alg?: string; kid?: string };
  let payload: ConsentArtefactPayload;
  try {
    header = JSON.parse(decode(parts[0]!).toString('utf8'));
    payload = JSON.parse(decode(parts[1]!).toString('utf8'));
  } catch {
    throw new ArtefactVerificationError('The JWS header or payload is not JSON');
  }
  if (header.alg !== 'RS256') throw new ArtefactVerificationError(`Unexpected alg ${String(header.alg)} (consent artefacts are RS256)`);
  const jwk = (jwks?.keys ?? []).find((k) => k.kid === header.kid && k.kty === 'RSA');
  if (!jwk) throw new ArtefactVerificationError(`No RSA key ${String(header.kid)} in the key set (rotated out or revoked: fetch the artefact again)`);
  let valid = false;
  try {
    const key = createPublicKey({ key: { kty: 'RSA', n: jwk.n, e: jwk.e }, format: 'jwk' });
    valid = verify('sha256', Buffer.from(`${parts[0]}.${parts[1]}`), key, decode(parts[2]!));
  } catch {
    valid = false;
  }
  if (!valid) throw new ArtefactVerificationError('The signature does not verify');
  const now = options.now ?? Math.floor(Date.now() / 1000);
  if (typeof payload.exp === 'number' && payload.exp <= now) throw new ArtefactVerificationError('The consent has expired (exp)');
  if (options.issuer !== undefined && payload.iss !== options.issuer) throw new ArtefactVerificationError(`Issued by ${String(payload.iss)}, not ${options.issuer}`);
  if (typeof payload.consent?.consent_id !== 'string') throw new ArtefactVerificationError('No consent in the payload');
  return payload;
}
