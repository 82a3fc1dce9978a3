import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

/** The package ships generated files: they must be what the sources and the server's OpenAPI give today. */
const pkg = fileURLToPath(new URL('..', import.meta.url));
const root = fileURLToPath(new URL('../../..', import.meta.url));
const scratch = mkdtempSync(join(tmpdir(), 'pont-ts-client-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

describe('the TypeScript package', () => {
  it('src/types.ts is generated from the OpenAPI document the server publishes today (npm run docs, or npm run clients:types)', () => {
    const target = join(scratch, 'types.ts');
    execFileSync(process.execPath, [join(root, 'node_modules/tsx/dist/cli.mjs'), join(pkg, 'scripts/generate-types.ts'), target], { cwd: root, stdio: 'pipe' });
    expect(readFileSync(target, 'utf8'), 'clients/typescript/src/types.ts is stale: run `npm run docs`').toBe(readFileSync(join(pkg, 'src/types.ts'), 'utf8'));
  }, 120_000);

  it('dist/ is built from src/ (npm run docs, or npm run clients:build)', () => {
    const out = join(scratch, 'dist');
    execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(pkg, 'tsconfig.build.json'), '--outDir', out], { cwd: root, stdio: 'pipe' });
    const files = readdirSync(out).sort();
    expect(files).toEqual(readdirSync(join(pkg, 'dist')).sort());
    for (const f of files) expect(readFileSync(join(out, f), 'utf8'), `clients/typescript/dist/${f} is stale: run \`npm run docs\``).toBe(readFileSync(join(pkg, 'dist', f), 'utf8'));
  }, 120_000);

  it('installs as users get it (npm pack): imported with import and with require, typed, MIT, its version in the User-Agent', async () => {
    const manifest = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8'));
    const { VERSION } = await import('../dist/index.js');
    expect(VERSION).toBe(manifest.version);
    expect(manifest.license).toBe('MIT');
    const packed = join(scratch, 'packed');
    mkdirSync(packed);
    const tarball = execFileSync('npm', ['pack', '--silent', '--pack-destination', packed], { cwd: pkg, encoding: 'utf8' }).trim().split('\n').pop()!;
    const app = join(scratch, 'app');
    const installed = join(app, 'node_modules/@pont/client');
    mkdirSync(installed, { recursive: true });
    execFileSync('tar', ['-xzf', join(packed, tarball), '-C', installed, '--strip-components=1']);
    expect(readdirSync(installed).sort()).toEqual(['LICENSE', 'README.md', 'dist', 'package.json']);
    expect(readFileSync(join(installed, 'LICENSE'), 'utf8')).toMatch(/^MIT License/);
    // Its one dependency holds types only: nothing at run time needs it.
    const check = `if (typeof c.Pont !== 'function' || c.VERSION !== '${manifest.version}' || !(new c.TimeoutError('x') instanceof c.PontError)) throw new Error('bad export'); console.log('ok')`;
    expect(execFileSync(process.execPath, ['--input-type=module', '-e', `import * as c from '@pont/client'; ${check}`], { cwd: app, encoding: 'utf8' }).trim()).toBe('ok');
    expect(execFileSync(process.execPath, ['-e', `const c = require('@pont/client'); ${check}`], { cwd: app, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim()).toBe('ok');
    // A TypeScript user: the declarations resolve, FHIR answers are typed.
    mkdirSync(join(app, 'node_modules/@medplum'), { recursive: true });
    symlinkSync(join(root, 'node_modules/@medplum/fhirtypes'), join(app, 'node_modules/@medplum/fhirtypes'));
    writeFileSync(join(app, 'package.json'), '{"type":"module"}');
    writeFileSync(
      join(app, 'use.ts'),
      [
        "import { Pont, responseOf, type CallOptions } from '@pont/client';",
        "const pont = new Pont({ clientId: 'c', clientSecret: 's', baseUrl: 'http://localhost' });",
        "const options: CallOptions = { purposeOfUse: 'TREAT', timeout: 1000 };",
        'export async function use(): Promise<string | undefined> {',
        "  const patient = await pont.fhir.read('Patient', 'p1', options);",
        "  for await (const observation of pont.fhir.search('Observation', { patient: 'Patient/p1' })) observation.valueQuantity?.value?.toFixed();",
        '  return (patient.birthDate ?? responseOf(patient)?.requestId) ?? undefined;',
        '}',
        '',
      ].join('\n'),
    );
    writeFileSync(join(app, 'tsconfig.json'), JSON.stringify({ compilerOptions: { module: 'nodenext', moduleResolution: 'nodenext', target: 'es2022', strict: true, noEmit: true, types: [], lib: ['es2022', 'dom'] }, files: ['use.ts'] }));
    execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', app], { cwd: app, stdio: 'pipe' });
  }, 120_000);
});
