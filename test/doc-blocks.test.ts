import { execFile } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { exportJWK, generateKeyPair } from 'jose';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../src/config';
import { startPont, type RunningPont } from '../src/server';
import { files, root as repo, shellBlocks, text, type FencedBlock } from './doc-blocks';
import { backend, createScratchDatabase, freePort } from './harness';

// Every shell block of the README and the guides, run as written against a fresh server, as a reader pastes them:
// the blocks of a file one after the other in one shell, so that what one sets the next has (only the server's URL,
// the receiver's port and the agent's /etc and /var paths put in). Two have their own test, which checks what their
// comments say they print; a block that cannot run here says why above its fence (`<!-- not run: … -->`, naming the
// test that runs its commands: test/docs-links.unit.test.ts checks it does). The generated tables:
// test/readme-blocks.unit.test.ts; commands, options and links: test/docs-links.unit.test.ts.
const readme = text('README.md');
const integrators = text('docs/integrators.md');

/** The first ```sh block after `heading` in `text`. */
function shellBlockAfter(text: string, heading: RegExp): string {
  const at = text.search(heading);
  expect(at, `no heading ${heading}`).toBeGreaterThanOrEqual(0);
  return /```sh\n([\s\S]*?)```/.exec(text.slice(at))![1]!;
}

/** The blocks with a test of their own (below), which the file's run leaves out. */
const OWN_TEST: Array<[string, RegExp]> = [
  ['README.md', /^## The first five minutes/m],
  ['docs/integrators.md', /^### Walk-through/m],
];
const hasOwnTest = (file: string, block: FencedBlock) => OWN_TEST.some(([f, heading]) => f === file && shellBlockAfter(text(f), heading) === `${block.body}\n`);

describe('the shell blocks of the documentation, run as written', () => {
  let pont: RunningPont;
  let dataDir: string;
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>> | undefined;
  let env: Record<string, string>;
  /** Where the files' blocks run: the checkout's bin/ and mappings/, and the files the blocks name (jwks.json…). */
  let work: string;

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'pont-readme-'));
    work = join(dataDir, 'work');
    mkdirSync(join(work, 'etc/pont'), { recursive: true });
    symlinkSync(join(repo, 'mappings'), join(work, 'mappings'));
    // `node bin/pont.js` as a checkout has it, on the run's build (test/global-build.ts, as pontCommand runs it): the
    // same commands, 0.7 s each instead of tsx's 1.8 s on the sources (test/cli-help.test.ts runs the sources').
    mkdirSync(join(work, 'bin'));
    const build = inject('pontBuild');
    writeFileSync(join(work, 'bin/pont.js'), build ? `process.setSourceMapsEnabled(true);\nawait import(${JSON.stringify(join(build, 'bin.js'))});\n` : `await import(${JSON.stringify(join(repo, 'bin/pont.js'))});\n`);
    const { publicKey } = await generateKeyPair('ES384');
    writeFileSync(join(work, 'jwks.json'), JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid: 'docs-1', alg: 'ES384', use: 'sig' }] }));
    copyFileSync(join(repo, 'test/terminology/example-codesystem.json'), join(work, 'codesystems.json'));
    const valueSet = { resourceType: 'ValueSet', url: 'http://example.org/fhir/ValueSet/all-findings', status: 'active', compose: { include: [{ system: 'http://example.org/fhir/CodeSystem/findings' }] } };
    writeFileSync(join(work, 'valuesets.ndjson'), `${JSON.stringify(valueSet)}\n`);
    copyFileSync(join(repo, 'test/terminology/Loinc.csv'), join(work, 'Loinc.csv'));
    scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
    env = { PORT: '0', LOG_LEVEL: 'error', PONT_DATA_DIR: join(dataDir, 'db'), ...(scratch ? { DATABASE_URL: scratch.url } : {}) };
    pont = await startPont(loadConfig(env));
  });
  afterAll(async () => {
    await pont?.close();
    await scratch?.drop();
    rmSync(dataDir, { recursive: true, force: true });
  });

  const run = (script: string, extra: Record<string, string> = {}) => promisify(execFile)('bash', ['-euo', 'pipefail', '-c', script], { cwd: work, env: { ...process.env, ...env, ...extra } });

  /**
   * What the guides say a reader has from the README's first five minutes: PONT, the demo's first client (CLIENT_ID,
   * CLIENT_SECRET) and its token (T, TOKEN), the first patient (HID, PID).
   */
  async function firstFiveMinutes(): Promise<Record<string, string>> {
    const demo = (await (await fetch(`${pont.url}/api/demo/reset`, { method: 'POST' })).json()) as { clients: Array<{ client_id: string; client_secret: string }>; patients: Array<{ health_id: string; patient_id: string }> };
    const { client_id, client_secret } = demo.clients[0]!;
    const answer = await fetch(`${pont.url}/api/v1/connect/auth/token`, {
      method: 'POST',
      headers: { authorization: `Basic ${Buffer.from(`${client_id}:${client_secret}`).toString('base64')}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=client_credentials',
    });
    const token = ((await answer.json()) as { access_token: string }).access_token;
    return { PONT: pont.url, CLIENT_ID: client_id, CLIENT_SECRET: client_secret, T: token, TOKEN: token, HID: demo.patients[0]!.health_id, PID: demo.patients[0]!.patient_id };
  }

  /** A block as the test runs it: the server's URL for the one `npm start` listens on, the agent's paths under `work`. */
  const put = (body: string) => body.replaceAll('http://127.0.0.1:8080', pont.url).replaceAll('/etc/pont/', `${work}/etc/pont/`).replaceAll('/var/lib/pont-bridge-agent', `${work}/var/lib/pont-bridge-agent`);

  for (const file of files.filter((f) => !f.startsWith('clients/'))) {
    const blocks = shellBlocks(file).filter((b) => b.notRun === undefined && !hasOwnTest(file, b));
    if (!blocks.length) continue;
    it(`${file}: its shell blocks run as written, one after the other (curl failing on an HTTP error)`, async () => {
      // A request the server refuses fails the block, as an error would stop a reader.
      const script = ['curl() { command curl --fail-with-body "$@"; }', ...blocks.map((b) => `echo '--- ${file}:${b.line}' >&2\n${put(b.body)}`)].join('\n');
      // The demo is reset (and its token made) only for the files whose blocks use what it gives.
      const needsDemo = blocks.some((b) => /\$\{?(T|TOKEN|HID|PID|CLIENT_ID|CLIENT_SECRET)\b/.test(b.body.replace(/^\s*(T|TOKEN|HID|PID)=.*$/gm, '')));
      try {
        await run(script, needsDemo ? await firstFiveMinutes() : { PONT: pont.url });
      } catch (err) {
        const { stdout = '', stderr = '' } = err as { stdout?: string; stderr?: string };
        throw new Error(`${file}: a block failed\n--- stdout (end):\n${stdout.slice(-3000)}\n--- stderr (end):\n${stderr.slice(-3000)}`);
      }
    }, 180_000);
  }

  it('the consent walk-through (docs/integrators.md) answers what its comments say', async () => {
    const block = shellBlockAfter(integrators, /^### Walk-through/m);
    const { stdout } = await run(block.replace(/^PONT=\S+/m, `PONT=${pont.url}`));
    const expected = [...block.matchAll(/#\s+(\d{3}|"[a-z]+")\s*$/gm)].map((m) => m[1]);
    expect(stdout.trim().split('\n')).toEqual(expected);
  }, 120_000);

  it("the README's first five minutes: demo, token, a FHIR search, a Connect record, a webhook received", async () => {
    const block = shellBlockAfter(readme, /^## The first five minutes/m);
    expect(block).toMatch(/^PONT=http:\/\/127\.0\.0\.1:8080$/m); // what `npm start` listens on
    const port = await freePort();
    const { stdout } = await run(block.replace(/^PONT=\S+/m, `PONT=${pont.url}`).replaceAll('9000', String(port)));
    const delivery = stdout.split('\n').find((line) => line.startsWith('{"id":"evt_'));
    expect(JSON.parse(delivery!)).toMatchObject({ type: 'lab_result.released', data: { test_name: 'Hemoglobin' } });
    expect(stdout).toMatch(/"display_name": "/); // the diagnosis record
    expect(stdout).toMatch(/"webhook_secret": "whsec_/);
    expect(stdout.trim().split('\n').at(-1)).toBe('204'); // unsubscribed
  }, 180_000);
});
