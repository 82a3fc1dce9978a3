import { importJWK, type JWK } from 'jose';

// A client's public JWK Set (SMART Backend Services): what registration accepts and what a fetched set may hold.

/** The algorithms SMART requires servers to support; no other is accepted (HS*, none, RS256...). */
export const ASSERTION_ALGORITHMS = ['RS384', 'ES384'];
/** A JWK Set larger than this is refused: a client needs a few keys, during a rotation. */
const MAX_KEYS = 16;

/** Members of a JWK that hold private or symmetric key material (RFC 7518 §6). */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

export interface PublicJwks {
  keys: JWK[];
}

/** The algorithm a key verifies assertions with: its `alg`, else SMART's for its type. */
const algorithmOf = (key: JWK) => key.alg ?? (key.kty === 'RSA' ? 'RS384' : 'ES384');

/**
 * A public JWK Set, or why it is refused: not a set, private key material (`d`...) anywhere, a key without `kty`
 * RSA or EC or without a `kid` of its own (SMART clients name their key in every assertion). At registration each key must
 * also be an RS384 or ES384 public key; a fetched set may hold other keys, which never match.
 */
export function parsePublicJwks(value: unknown, options: { registration?: boolean } = {}): PublicJwks | string {
  if (typeof value !== 'object' || value === null || !Array.isArray((value as PublicJwks).keys)) return 'a JWK Set is an object with a "keys" array';
  const keys = (value as PublicJwks).keys;
  if (!keys.length || keys.length > MAX_KEYS) return `a JWK Set here holds 1 to ${MAX_KEYS} keys`;
  for (const [i, key] of keys.entries()) {
    if (typeof key !== 'object' || key === null || Array.isArray(key)) return `key ${i} is not a JWK object`;
    const secret = PRIVATE_MEMBERS.find((m) => m in key);
    if (secret) return `key ${i} holds private key material ("${secret}"): register the public keys only`;
    if (key.kty !== 'RSA' && key.kty !== 'EC') return `key ${i}: kty must be RSA or EC`;
    if (typeof key.kid !== 'string' || !key.kid || key.kid.length > 256) return `key ${i} needs a kid (1-256 characters)`;
    if (options.registration && !ASSERTION_ALGORITHMS.includes(algorithmOf(key))) return `key ${i}: alg must be ${ASSERTION_ALGORITHMS.join(' or ')}`;
    // A key for encryption (or not for verifying) never verifies an assertion: jose would refuse it at every token request.
    if (options.registration && key.use !== undefined && key.use !== 'sig') return `key ${i}: use must be "sig" (or left out): it verifies signed assertions`;
    if (options.registration && key.key_ops !== undefined && !(Array.isArray(key.key_ops) && key.key_ops.includes('verify')))
      return `key ${i}: key_ops must include "verify" (or be left out): it verifies signed assertions`;
    if (keys.findIndex((k) => k.kid === key.kid) !== i) return `key ${i}: kid "${key.kid}" is used twice (an assertion's kid must name one key)`;
  }
  return { keys: keys.map((k) => ({ ...k })) };
}

/** parsePublicJwks at registration, plus: each key imports as a public key of its algorithm (an RSA key of 2048 bits or more, an EC key on P-384). */
export async function checkRegisteredJwks(jwks: PublicJwks): Promise<string | undefined> {
  for (const [i, key] of jwks.keys.entries()) {
    try {
      const imported = await importJWK(key, algorithmOf(key));
      const modulus = (imported as { algorithm?: { modulusLength?: number } }).algorithm?.modulusLength ?? 0;
      if (key.kty === 'RSA' && modulus < 2048) return `key ${i}: an RSA key has at least 2048 bits`;
    } catch (err) {
      return `key ${i} is not a usable ${algorithmOf(key)} public key (${(err as Error).message})`;
    }
  }
  return undefined;
}
