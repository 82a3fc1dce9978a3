import { vi } from 'vitest';

/**
 * Polls `check` (every `intervalMs`) until it stops throwing (or rejecting) and returns what it returned; fails with
 * `check`'s last error after `timeoutMs`. For arrivals a test cannot await directly (another process, a row a
 * background worker writes): the test waits exactly as long as the arrival takes, never a fixed time.
 */
export function eventually<T>(check: () => T | Promise<T>, { timeoutMs = 20_000, intervalMs = 10 }: { timeoutMs?: number; intervalMs?: number } = {}): Promise<T> {
  return vi.waitFor(check, { timeout: timeoutMs, interval: intervalMs });
}
