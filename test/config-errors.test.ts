/**
 * A bad configuration is reported whole: every missing or bad variable in one error, each with the variable, the
 * problem and how to fix it, so one failed start is enough to find them all.
 */
import { execFile } from 'node:child_process';
import { createServer, type Server } from 'node:net';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { CONFIG_VARIABLES, ConfigError, loadConfig } from '../src/config';
import { commandDatabase, freePort, pontCommand } from './harness';

const repo = fileURLToPath(new URL('..', import.meta.url));
const KEY = Buffer.alloc(32, 7).toString('base64');

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as ConfigError).problems;
  }
  throw new Error('the configuration was accepted');
}

describe('configuration errors, all at once', () => {
  it('production with three problems: one error naming all three, each with its fix', () => {
    let message = '';
    try {
      loadConfig({ NODE_ENV: 'production', PORT: 'eighty' });
    } catch (err) {
      message = (err as Error).message;
    }
    expect(message.split('\n')).toEqual([
      'Invalid configuration (3 problems):',
      expect.stringMatching(/^ {2}PORT: .*; fix: set a whole number from 0 to 65535/),
      expect.stringMatching(/^ {2}PONT_WEBHOOK_SECRET_KEY: required when PONT_ENV=production; fix: .*openssl rand -base64 32/),
      expect.stringMatching(/^ {2}PONT_MATCH_KEY_SECRET: required when PONT_ENV=production; fix: .*openssl rand -base64 32/),
    ]);
  });

  it('a bad value does not hide the rules that need the others', () => {
    const problems = problemsOf({
      PONT_ENV: 'sandbox',
      LOG_LEVEL: 'loud',
      PONT_RATE_LIMITS: 'FHIR=lots',
      PONT_MATCH_KEY_SECRET: 'c2hvcnQ=',
      DATABASE_URL: 'mysql://db',
    });
    expect(problems.map((p) => p.split(':')[0])).toEqual(['DATABASE_URL', 'LOG_LEVEL', 'PONT_MATCH_KEY_SECRET', 'PONT_RATE_LIMITS', 'PONT_WEBHOOK_SECRET_KEY']);
    expect(problems[0]).toMatch(/^DATABASE_URL: must be a postgres:\/\/ URL; fix: set postgres:\/\/USER:PASSWORD@HOST:5432\/DATABASE, or unset it/);
    expect(problems[1]).toMatch(/^LOG_LEVEL: .*"silent"\|"error"\|"warn"\|"info"\|"debug"/);
    expect(problems[2]).toMatch(/^PONT_MATCH_KEY_SECRET: must be 32 bytes, base64-encoded; fix: /);
    expect(problems[4]).toMatch(/^PONT_WEBHOOK_SECRET_KEY: required when PONT_ENV=sandbox; fix: /);
  });

  it('the development rules and the production rules report alongside the values', () => {
    expect(problemsOf({ HOST: '0.0.0.0', PORT: '70000' }).map((p) => p.split(':')[0])).toEqual(['PORT', 'HOST']);
    const production = problemsOf({ PONT_ENV: 'production', PONT_WEBHOOK_SECRET_KEY: KEY, PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true', PONT_PUBLIC_URL: 'pont' });
    expect(production).toEqual([
      expect.stringMatching(/^PONT_PUBLIC_URL: .*; fix: set the absolute URL integrators use/),
      expect.stringMatching(/^PONT_MATCH_KEY_SECRET: required when PONT_ENV=production/),
      'PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: http:// callbacks are never allowed in production; fix: unset it (or set false)',
    ]);
  });

  // Issue 42: LOG_LEVEL and METRICS_PORT had no fix. Every error a configuration can produce: each variable with values
  // of every wrong kind, and each rule between variables.
  it('every configuration error names its variable, the problem and a fix', () => {
    const wrong = ['x', '-1', '1.5', '99999999', 'http://', 'postgres://db', '0', 'true-ish'];
    const envs: Array<Record<string, string>> = [
      ...CONFIG_VARIABLES.flatMap((name) => wrong.map((value) => ({ [name]: value }))),
      { PONT_ENV: 'production' },
      { PONT_ENV: 'sandbox', PONT_MAPPINGS_WATCH: 'true' },
      { PONT_ENV: 'production', PONT_WEBHOOK_ALLOW_HTTP_LOOPBACK: 'true' },
      { HOST: '0.0.0.0' },
      { DATABASE_READ_URL: 'postgres://replica/pont' },
      { METRICS_PORT: '9090', METRICS_HOST: '0.0.0.0' },
      { PONT_RETENTION_AUDIT: '1y' },
    ];
    const lines = new Set<string>();
    for (const env of envs) {
      try {
        loadConfig(env);
      } catch (err) {
        if (!(err instanceof ConfigError)) throw err;
        for (const problem of err.problems) lines.add(problem);
      }
    }
    const named = new Set([...lines].map((line) => line.split(':')[0]));
    // Every variable but those that take any text (a path, a name) has an error here, so none is left untried.
    expect(CONFIG_VARIABLES.filter((name) => !named.has(name)).sort()).toEqual(['METRICS_HOST', 'NODE_ENV', 'PONT_BULK_EXPORT_DIR', 'PONT_DATA_DIR', 'PONT_MAPPINGS_DIR']);
    const withoutFix = [...lines].filter((line) => !/^[A-Z0-9_]+: .+; fix: \S.*$/.test(line));
    expect(withoutFix).toEqual([]);
  });

  it('a good configuration still loads', () => {
    expect(loadConfig({ PONT_ENV: 'production', PONT_WEBHOOK_SECRET_KEY: KEY, PONT_MATCH_KEY_SECRET: KEY, LOG_LEVEL: 'warn' })).toMatchObject({
      environment: 'production',
      logLevel: 'warn',
    });
  });

  // The command prints them all and exits 1 (it ran and failed), before touching any database.
  it('a command started with a bad configuration prints every problem and exits 1', async () => {
    const env: Record<string, string | undefined> = { ...process.env, PONT_ENV: 'production', PORT: 'x', LOG_LEVEL: 'error' };
    for (const name of ['DATABASE_URL', 'PONT_WEBHOOK_SECRET_KEY', 'PONT_MATCH_KEY_SECRET']) delete env[name];
    const result = await new Promise<{ code: number; stderr: string }>((resolve) =>
      execFile(process.execPath, pontCommand('migrate'), { cwd: repo, env }, (err, _out, stderr) => resolve({ code: err ? Number((err as { code?: number }).code) : 0, stderr })),
    );
    expect(result.code).toBe(1);
    expect(result.stderr).toMatch(/^Invalid configuration \(3 problems\):\n {2}PORT: .*\n {2}PONT_WEBHOOK_SECRET_KEY: .*\n {2}PONT_MATCH_KEY_SECRET: .*\n$/);
  }, 120_000);
});

/** `pont ARGS…` with `env` over this process's environment (LOG_LEVEL=error): its exit code and stderr; killed after `ms`. */
function pontFails(env: Record<string, string | undefined>, args: string[], ms = 90_000): Promise<{ code: number | string; stderr: string }> {
  const merged: Record<string, string | undefined> = { ...process.env, LOG_LEVEL: 'error', HOST: '127.0.0.1', ...env };
  for (const [name, value] of Object.entries(merged)) if (value === undefined) delete merged[name];
  return new Promise((resolve) =>
    execFile(process.execPath, pontCommand(...args), { cwd: repo, env: merged, timeout: ms, killSignal: 'SIGKILL' }, (err, _out, stderr) =>
      resolve({ code: err ? ((err as { killed?: boolean }).killed ? 'killed: no answer' : Number((err as { code?: number }).code)) : 0, stderr }),
    ),
  );
}

/** One line `VARIABLE: problem; fix: how` under the heading, nothing else (no stack, no raw error alone). */
const oneProblem = (variable: string) => new RegExp(`^Invalid configuration \\(1 problem\\):\n {2}${variable}: [^\n]+; fix: [^\n]+\n$`);

// Found by an outside review: these stopped the start with a raw error (ENOENT, getaddrinfo, EADDRINUSE, ECONNREFUSED)
// and no fix, or (PONT_DATA_DIR under /proc) never stopped at all.
describe('what the configuration names does not work here: the variable, the problem and the fix', () => {
  it('PONT_DATA_DIR that cannot be made a directory (under /proc, under a file) stops the start at once', async () => {
    const file = fileURLToPath(new URL('../package.json', import.meta.url));
    const paths = [`${file}/data`, ...(process.platform === 'linux' ? ['/proc/pont-test/data'] : [])];
    for (const dir of paths) {
      const result = await pontFails({ PONT_DATA_DIR: dir, DATABASE_URL: undefined, PORT: '0' }, ['serve'], 60_000);
      expect(result.code, `${dir}: ${result.stderr}`).toBe(1);
      expect(result.stderr).toMatch(oneProblem('PONT_DATA_DIR'));
      expect(result.stderr).toContain(dir);
    }
  }, 180_000);

  it('PONT_MAPPINGS_DIR that is not a directory', async () => {
    const result = await pontFails({ PONT_MAPPINGS_DIR: '/nonexistent-pont-maps', PORT: '0' }, ['serve']);
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toMatch(oneProblem('PONT_MAPPINGS_DIR'));
    expect(result.stderr).toContain('/nonexistent-pont-maps');
  }, 120_000);

  it('DATABASE_URL where nothing answers', async () => {
    const port = await freePort();
    const result = await pontFails({ DATABASE_URL: `postgres://postgres@127.0.0.1:${port}/pont`, PORT: '0' }, ['migrate']);
    expect(result.code, result.stderr).toBe(1);
    expect(result.stderr).toMatch(oneProblem('DATABASE_URL'));
    expect(result.stderr).toContain(`127.0.0.1:${port}`);
  }, 120_000);

  it('PORT in use, METRICS_HOST that does not resolve', async () => {
    const database = await commandDatabase();
    const taken: Server = createServer();
    const port = await freePort();
    await new Promise<void>((resolve) => taken.listen(port, '127.0.0.1', resolve));
    try {
      const [inUse, metrics] = await Promise.all([
        pontFails({ ...database.env, PORT: String(port) }, ['serve']),
        pontFails({ ...database.env, PORT: '0', METRICS_PORT: '0', METRICS_HOST: 'nosuchhost.invalid', METRICS_TOKEN: 'a'.repeat(32) }, ['serve']),
      ]);
      expect(inUse.code, inUse.stderr).toBe(1);
      expect(inUse.stderr).toMatch(oneProblem('PORT'));
      expect(inUse.stderr).toMatch(new RegExp(`PORT: 127\\.0\\.0\\.1:${port} is in use.*; fix: .*another PORT.*stop`));
      expect(metrics.code, metrics.stderr).toBe(1);
      expect(metrics.stderr).toMatch(oneProblem('METRICS_HOST'));
      expect(metrics.stderr).toContain('nosuchhost.invalid');
    } finally {
      taken.close();
      await database.cleanup();
    }
  }, 240_000);
});
