import { describe, expect, it } from 'vitest';
import { BRIDGE_TIMESTAMP_TOLERANCE_SECONDS, timestampIsFresh } from '../src/auth/agents';

/** X-Bridge-Timestamp, against an injected clock: the tolerance holds to the second, both ways. */
describe('timestampIsFresh', () => {
  const now = Date.UTC(2026, 0, 15, 12, 0, 0);
  const seconds = now / 1000;

  it(`accepts up to ${BRIDGE_TIMESTAMP_TOLERANCE_SECONDS} s either side of the clock, and not a second more`, () => {
    for (const offset of [0, 1, -1, BRIDGE_TIMESTAMP_TOLERANCE_SECONDS, -BRIDGE_TIMESTAMP_TOLERANCE_SECONDS])
      expect(timestampIsFresh(String(seconds + offset), now)).toBe(true);
    for (const offset of [BRIDGE_TIMESTAMP_TOLERANCE_SECONDS + 1, -BRIDGE_TIMESTAMP_TOLERANCE_SECONDS - 1, 86_400])
      expect(timestampIsFresh(String(seconds + offset), now)).toBe(false);
  });

  it('refuses what is not whole Unix seconds', () => {
    for (const header of ['', ' ', `${seconds}.5`, `-${seconds}`, `${seconds}000`, '1e9', '0x6789abcd', `${seconds} `, '9'.repeat(13)])
      expect(timestampIsFresh(header, now)).toBe(false);
  });
});
