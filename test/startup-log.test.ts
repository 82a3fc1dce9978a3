/**
 * What operators read in the logs: one start-up record (mode, database, public URL, where the secrets come from;
 * never a secret), and levels they can alert on (`warn` and `error` on stderr).
 */
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { describeDatabase, describeSecrets, loadConfig, startupFields } from '../src/config';
import { createLogger } from '../src/log';
import { backend, createScratchDatabase, pontCommand } from './harness';

const repo = fileURLToPath(new URL('..', import.meta.url));

describe('the start-up record', () => {
  it('of `pont serve`: one JSON line with mode, database, public URL and the secrets source, and no secret anywhere', async () => {
    const webhookKey = randomBytes(32).toString('base64');
    const matchKey = randomBytes(32).toString('base64');
    const dataDir = mkdtempSync(join(tmpdir(), 'pont-startup-'));
    const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
    // A password in the URL (PostgreSQL's test server trusts local connections, so any will do) must not be printed.
    const password = `pw-${randomBytes(8).toString('hex')}`;
    const databaseUrl = scratch ? Object.assign(new URL(scratch.url), { password }).toString() : '';
    const env = {
      ...process.env,
      PONT_ENV: 'sandbox',
      PONT_WEBHOOK_SECRET_KEY: webhookKey,
      PONT_MATCH_KEY_SECRET: matchKey,
      PONT_PUBLIC_URL: 'https://pont.example.test',
      PORT: '0',
      LOG_LEVEL: 'info',
      PONT_DATA_DIR: dataDir,
      DATABASE_URL: databaseUrl,
    };
    const server = spawn(process.execPath, pontCommand('serve'), { cwd: repo, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    server.stderr!.on('data', (d) => (output += d));
    // Without the record the server would run on: stop it, which ends the loop below, and the test fails.
    const deadline = setTimeout(() => server.kill('SIGKILL'), 90_000);
    try {
      let record: Record<string, unknown> | undefined;
      for await (const line of createInterface({ input: server.stdout! })) {
        output += line + '\n';
        if (line.includes('"pont started"')) {
          record = JSON.parse(line);
          break;
        }
      }
      expect(record, output).toMatchObject({
        level: 'info',
        msg: 'pont started',
        mode: 'sandbox',
        public_url: 'https://pont.example.test',
        secrets: 'environment',
        workers: 1,
        metrics: null,
      });
      expect(record!.listening).toMatch(/^http:\/\/127\.0\.0\.1:\d+$/);
      const url = scratch ? new URL(scratch.url) : undefined;
      expect(record!.database).toBe(url ? `PostgreSQL at ${url.hostname}:${url.port || 5432}${url.pathname}` : `embedded PGlite at ${dataDir}`);
      expect(output).toContain('  Secrets: environment');
      for (const secret of [webhookKey, matchKey, password]) expect(output).not.toContain(secret);
    } finally {
      clearTimeout(deadline);
      if (server.exitCode === null && server.signalCode === null) {
        const exited = new Promise((resolve) => server.once('exit', resolve));
        server.kill('SIGTERM');
        await exited;
      }
      await scratch?.drop();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);

  it('says when the secrets are the public development constants, and where the database is', () => {
    expect(describeSecrets(loadConfig({}))).toBe('public development defaults (PONT_WEBHOOK_SECRET_KEY and PONT_MATCH_KEY_SECRET unset)');
    const key = randomBytes(32).toString('base64');
    expect(describeSecrets(loadConfig({ PONT_MATCH_KEY_SECRET: key }))).toBe('environment, except PONT_WEBHOOK_SECRET_KEY: public development default');
    expect(describeDatabase({ databaseUrl: 'postgres://pont:hunter2@db.internal/pont_prod?sslmode=require' })).toBe('PostgreSQL at db.internal:5432/pont_prod');
    expect(describeDatabase({ dataDir: '/var/lib/pont' })).toBe('embedded PGlite at /var/lib/pont');
    expect(describeDatabase({})).toBe('embedded PGlite in memory');
    const fields = startupFields(loadConfig({ DATABASE_URL: 'postgres://pont:hunter2@db:6543/pont', PONT_PUBLIC_URL: 'https://p.example' }));
    expect(fields).toEqual({ mode: 'development', database: 'PostgreSQL at db:6543/pont', public_url: 'https://p.example', secrets: expect.stringMatching(/^public development defaults/) });
    expect(JSON.stringify(fields)).not.toContain('hunter2');
  });
});

describe('log levels', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('warn goes to stderr, between error and info: LOG_LEVEL=warn keeps warnings and drops info', () => {
    const stderr = vi.spyOn(process.stderr, 'write').mockReturnValue(true);
    const stdout = vi.spyOn(process.stdout, 'write').mockReturnValue(true);
    const log = createLogger(loadConfig({ LOG_LEVEL: 'warn' }).logLevel);
    log.warn('webhook delivery exhausted', { delivery_id: 'd1' });
    log.info('request');
    log.debug('detail');
    expect(stdout).not.toHaveBeenCalled();
    expect(stderr).toHaveBeenCalledTimes(1);
    expect(JSON.parse(String(stderr.mock.calls[0]![0]))).toMatchObject({ level: 'warn', msg: 'webhook delivery exhausted', delivery_id: 'd1' });
    createLogger('error').warn('not shown');
    expect(stderr).toHaveBeenCalledTimes(1);
  });
});
