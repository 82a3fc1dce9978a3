/** Safe by default: what the image, the compose file and a bare `npm start` run as, and what they refuse. */
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { describeEnvironment, loadConfig } from '../src/config';
import { pontCommand } from './harness';

const repo = fileURLToPath(new URL('..', import.meta.url));
const read = (file: string) => readFileSync(join(repo, file), 'utf8');
const secrets = { PONT_WEBHOOK_SECRET_KEY: Buffer.alloc(32, 7).toString('base64'), PONT_MATCH_KEY_SECRET: Buffer.alloc(32, 9).toString('base64') };

/** The runtime stage's ENV of the Dockerfile, as the container's environment. */
function imageEnv(): Record<string, string> {
  const runtime = read('Dockerfile').split(/^FROM /m).at(-1)!;
  const env = /^ENV ((?:.*\\\n)*.*)$/m.exec(runtime)![1]!.replace(/\\\n/g, ' ');
  return Object.fromEntries(env.trim().split(/\s+/).map((pair) => pair.split('=', 2) as [string, string]));
}

describe('the mode', () => {
  it('is production under NODE_ENV=production without PONT_ENV, which then demands its secrets', () => {
    expect(() => loadConfig({ NODE_ENV: 'production' })).toThrow(/PONT_WEBHOOK_SECRET_KEY: required when PONT_ENV=production/);
    expect(() => loadConfig({ NODE_ENV: 'production', PONT_WEBHOOK_SECRET_KEY: secrets.PONT_WEBHOOK_SECRET_KEY })).toThrow(/PONT_MATCH_KEY_SECRET: required when PONT_ENV=production/);
    expect(loadConfig({ NODE_ENV: 'production', ...secrets }).environment).toBe('production');
    expect(loadConfig({ NODE_ENV: 'production', PONT_ENV: 'sandbox', ...secrets }).environment).toBe('sandbox');
  });

  it('is development for a bare `npm start` on a laptop, listening on loopback only', () => {
    const config = loadConfig({});
    expect(config.environment).toBe('development');
    expect(config.host).toBe('127.0.0.1');
    expect(loadConfig({ NODE_ENV: 'test' }).environment).toBe('development');
  });

  it('refuses a development server on a non-loopback address unless PONT_ALLOW_DEV_ON_NETWORK=true', () => {
    for (const HOST of ['0.0.0.0', '::', '192.168.1.10', 'pont.example'])
      expect(() => loadConfig({ HOST })).toThrow(/HOST: .* is not a loopback address.*PONT_ALLOW_DEV_ON_NETWORK=true/s);
    expect(() => loadConfig({ PONT_ENV: 'development', HOST: '0.0.0.0', PONT_ALLOW_DEV_ON_NETWORK: 'false' })).toThrow(/PONT_ALLOW_DEV_ON_NETWORK/);
    for (const HOST of ['127.0.0.1', '127.0.0.2', '::1', 'localhost', '::ffff:127.0.0.1']) expect(loadConfig({ HOST }).host).toBe(HOST);
    expect(loadConfig({ HOST: '0.0.0.0', PONT_ALLOW_DEV_ON_NETWORK: 'true' }).host).toBe('0.0.0.0');
    // Sandbox and production have their own secrets: they may listen anywhere.
    expect(loadConfig({ HOST: '0.0.0.0', PONT_ENV: 'sandbox', ...secrets }).host).toBe('0.0.0.0');
  });

  it('is described in one line at start', () => {
    expect(describeEnvironment(loadConfig({}))).toMatch(/^development: public development secrets, demo reset open.*loopback only/);
    expect(describeEnvironment(loadConfig({ HOST: '0.0.0.0', PONT_ALLOW_DEV_ON_NETWORK: 'true' }))).toMatch(/exposed on 0\.0\.0\.0 \(PONT_ALLOW_DEV_ON_NETWORK=true\)/);
    expect(describeEnvironment(loadConfig({ PONT_ENV: 'sandbox', ...secrets }))).toMatch(/^sandbox: .*demo reset for operator clients only/);
    expect(describeEnvironment(loadConfig({ NODE_ENV: 'production', ...secrets }))).toMatch(/^production: .*no demo reset/);
  });

  it('rate-limits the demo reset by default (5 a minute per address), as PONT_RATE_LIMITS may change', () => {
    expect(loadConfig({}).rateLimits['demo-reset']).toEqual({ points: 5, seconds: 60 });
    expect(loadConfig({ PONT_RATE_LIMITS: 'Demo-Reset=2/10' }).rateLimits['demo-reset']).toEqual({ points: 2, seconds: 10 });
  });
});

describe('the image and the compose file', () => {
  it('declare production unless told otherwise', () => {
    const env = imageEnv();
    expect(env).toMatchObject({ NODE_ENV: 'production', PONT_ENV: 'production', HOST: '0.0.0.0' });
    expect(read('docker-compose.yml')).toMatch(/^\s+PONT_ENV: \$\{PONT_ENV:-production\}$/m);
    expect(read('docker-compose.yml')).not.toMatch(/PONT_ENV:-development/);
    // The compose file passes the secrets production needs through (unset: Pont stops, naming them).
    for (const name of ['PONT_WEBHOOK_SECRET_KEY', 'PONT_MATCH_KEY_SECRET']) expect(read('docker-compose.yml')).toContain(`${name}: \${${name}:-}`);
  });

  it('run the compiled build (dist/, made in a build stage) as the unprivileged `node` user, without tsx', () => {
    const stages = read('Dockerfile').split(/^FROM /m);
    const build = stages.find((s) => / AS build$/m.test(s.split('\n')[0]!))!;
    expect(build).toMatch(/^RUN npm run build$/m);
    const runtime = stages.at(-1)!;
    expect(runtime).toMatch(/^COPY --from=build \/app\/dist \.\/dist$/m);
    expect(runtime).not.toMatch(/^COPY src /m);
    expect(runtime).toMatch(/^USER node$/m);
    expect(runtime).toMatch(/^CMD \["node", "--max-old-space-size=512", "--enable-source-maps", "dist\/bin\.js", "serve"\]$/m);
    expect(read('Dockerfile')).toMatch(/^RUN npm ci --omit=dev /m);
    // tsx is for development only: not a production dependency, and `npm start` runs the build too.
    const pkg = JSON.parse(read('package.json'));
    expect(pkg.dependencies.tsx).toBeUndefined();
    expect(pkg.devDependencies.tsx).toBeDefined();
    expect(pkg.scripts.prestart).toBe('npm run build');
    // exec: npm runs the script through sh (dash), which would otherwise take npm's forwarded SIGTERM and die, leaving node running.
    // MALLOC_ARENA_MAX: two malloc arenas unless the operator's environment says otherwise, as the image's ENV.
    expect(pkg.scripts.start).toBe('MALLOC_ARENA_MAX=${MALLOC_ARENA_MAX:-2} exec node --max-old-space-size=512 --enable-source-maps dist/bin.js serve');
    expect(runtime).toMatch(/^ENV MALLOC_ARENA_MAX=2$/m);
  });

  // The embedded database (the image's default volume), started from the image's environment as an operator would.
  it('start in production: without secrets it stops naming them; with them, no demo reset', async () => {
    const dataDir = mkdtempSync(join(tmpdir(), 'pont-image-'));
    const env = { ...process.env, ...imageEnv(), PORT: '0', PONT_DATA_DIR: dataDir, LOG_LEVEL: 'error', DATABASE_URL: '' };
    const serve = (extra: Record<string, string>) => spawn(process.execPath, pontCommand('serve'), { cwd: repo, env: { ...env, ...extra } });
    try {
      const bare = serve({});
      let stderr = '';
      bare.stderr.on('data', (d) => (stderr += d));
      const code = await new Promise((done) => bare.on('exit', done));
      expect(code).toBe(1);
      expect(stderr).toMatch(/PONT_WEBHOOK_SECRET_KEY: required when PONT_ENV=production/);

      const pont = serve(secrets);
      try {
        const lines = createInterface({ input: pont.stdout });
        const seen: string[] = [];
        for await (const line of lines) {
          seen.push(line);
          if (line.includes('Mode:')) break;
        }
        expect(seen.join('\n')).toMatch(/Mode: production: own secrets, no demo reset/);
        const port = /listening on http:\/\/[^:]+:(\d+)/.exec(seen.join('\n'))![1];
        const reset = await fetch(`http://127.0.0.1:${port}/api/demo/reset`, { method: 'POST' });
        expect(reset.status).toBe(404);
      } finally {
        pont.kill('SIGTERM');
        await new Promise((done) => pont.on('exit', done));
      }
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 120_000);
});
