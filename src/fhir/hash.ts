import { hash } from 'node:crypto';

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
