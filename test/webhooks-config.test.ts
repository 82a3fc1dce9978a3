/** Webhook settings are validated once, at start: a bad value stops the start with a clear message. */
import { describe, expect, it } from 'vitest';
import { loadConfig } from '../src/config';

const KEY = Buffer.alloc(32, 7).toString('base64');

describe('webhook configuration', () => {
  it('defaults to the schedule of section 8 and a 10 s timeout', () => {
    const { webhooks } = loadConfig({});
    expect(webhooks.retryDelaysMs).toEqual([60_000, 300_000, 900_000, 3_600_000, 21_600_000, 86_400_000]);
    expect(webhooks.timeoutMs).toBe(10_000);
    expect(webhooks.allowHttpLoopback).toBe(true);
  });

  it('accepts a shortened schedule with units', () => {
    expect(loadConfig({ PONT_WEBHOOK_RETRY_DELAYS: '0,250ms,1s,1.5s,2m,1h' }).webhooks.retryDelaysMs).toEqual([
      0, 250, 1000, 1500, 120_000, 3_600_000,
    ]);
  });

  it('also takes the whole table of section 8, leading 0 included', () => {
    expect(loadConfig({ PONT_WEBHOOK_RETRY_DELAYS: '0,1s,2s,3s,4s,5s,6s' }).webhooks.retryDelaysMs).toEqual([1000, 2000, 3000, 4000, 5000, 6000]);
  });

  it.each([
    [{ PONT_WEBHOOK_RETRY_DELAYS: '1m,5m' }, /must list 6 delays/],
    [{ PONT_WEBHOOK_RETRY_DELAYS: '1s,1s,2s,3s,4s,5s,6s' }, /attempt 1 is always immediate/],
    [{ PONT_WEBHOOK_RETRY_DELAYS: '0,0,1s,2s,3s,4s,5s,6s' }, /must list 6 delays/],
    [{ PONT_WEBHOOK_RETRY_DELAYS: '1m,5m,15m,1h,6h,soon' }, /"soon" is not a duration/],
    [{ PONT_WEBHOOK_RETRY_DELAYS: '1m,5m,15m,1h,6h,24' }, /"24" is not a duration/],
    [{ PONT_WEBHOOK_TIMEOUT: '0' }, /PONT_WEBHOOK_TIMEOUT/],
    [{ PONT_WEBHOOK_SECRET_KEY: 'c2hvcnQ=' }, /PONT_WEBHOOK_SECRET_KEY: must be 32 bytes/],
    [{ PONT_ENV: 'production' }, /PONT_WEBHOOK_SECRET_KEY: required when PONT_ENV=production/],
    [{ PONT_ENV: 'sandbox' }, /PONT_WEBHOOK_SECRET_KEY: required/],
    [{ PONT_ENV: 'production', PONT_WEBHOOK_SECRET_KEY: KEY, PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true' }, /never allowed in production/],
    [{ PONT_ENV: 'production', PONT_WEBHOOK_SECRET_KEY: KEY }, /PONT_MATCH_KEY_SECRET: required when PONT_ENV=production/],
    [{ PONT_MATCH_KEY_SECRET: 'c2hvcnQ=' }, /PONT_MATCH_KEY_SECRET: must be 32 bytes/],
  ])('refuses %j', (env, message) => {
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('in production takes the given key and refuses http:// callbacks', () => {
    const { webhooks } = loadConfig({ PONT_ENV: 'production', PONT_WEBHOOK_SECRET_KEY: KEY, PONT_MATCH_KEY_SECRET: KEY, PONT_PUBLIC_URL: 'https://pont.example.org' });
    expect(webhooks.secretKey.equals(Buffer.alloc(32, 7))).toBe(true);
    expect(webhooks.allowHttpLoopback).toBe(false);
  });
});
