import { createHash, hash } from 'node:crypto';

/**
 * 64-bit hash of a tuple, as a decimal string for a bigint column. Search-index rows are found by
 * these hashes (one compact index per lookup kind), and each query re-checks nothing it doesn't need to:
 * a collision would need two different values of the same parameter to share 64 bits.
 */
const cache = new Map<string, string>();
const CACHE_LIMIT = 200_000;

export function hashKey(...parts: string[]): string {
  const key = parts.join('\u0000');
  let value = cache.get(key);
  if (value === undefined) {
    value = hash('md5', key, 'buffer').readBigInt64LE(0).toString();
    if (cache.size >= CACHE_LIMIT) cache.clear();
    cache.set(key, value);
  }
  return value;
}

/**
 * A name-based UUID (version 5, RFC 9562 5.5) of `name` in `namespace`: the same name gives the same id, so a
 * resource written again from the same source (a Bridge resend, the demo's next reset, a stock line set again)
 * lands on the same FHIR id.
 */
export function uuidV5(namespace: string, name: string): string {
  const h = createHash('sha1').update(namespace).update('\u0000').update(name).digest();
  h[6] = (h[6]! & 0x0f) | 0x50;
  h[8] = (h[8]! & 0x3f) | 0x80;
  const x = h.subarray(0, 16).toString('hex');
  return `${x.slice(0, 8)}-${x.slice(8, 12)}-${x.slice(12, 16)}-${x.slice(16, 20)}-${x.slice(20)}`;
}
