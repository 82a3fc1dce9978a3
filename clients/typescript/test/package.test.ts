import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
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
  it('src/types.ts is generated from the OpenAPI document the server publishes today (npm run clients:types)', () => {
    const target = join(scratch, 'types.ts');
    execFileSync(process.execPath, [join(root, 'node_modules/tsx/dist/cli.mjs'), join(pkg, 'scripts/generate-types.ts'), target], { cwd: root, stdio: 'pipe' });
    expect(readFileSync(target, 'utf8')).toBe(readFileSync(join(pkg, 'src/types.ts'), 'utf8'));
  }, 120_000);

  it('dist/ is built from src/ (npm run clients:build)', () => {
    const out = join(scratch, 'dist');
    execFileSync(process.execPath, [join(root, 'node_modules/typescript/bin/tsc'), '-p', join(pkg, 'tsconfig.build.json'), '--outDir', out], { cwd: root, stdio: 'pipe' });
    const files = readdirSync(out).sort();
    expect(files).toEqual(readdirSync(join(pkg, 'dist')).sort());
    for (const f of files) expect(readFileSync(join(out, f), 'utf8'), f).toBe(readFileSync(join(pkg, 'dist', f), 'utf8'));
  }, 120_000);
});
