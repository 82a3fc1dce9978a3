/**
 * vitest globalSetup of the integration projects: `npm run build` once for the whole run (`--no-check`: `tsc -p .`
 * type-checks; 4 s instead of 11), into a directory of its own
 * beside dist/ (`dist-test-<pid>`: runs by other people in the same checkout neither share nor remove it), removed
 * when the run ends. The `pont` processes the tests start run it (`pontCommand`, test/harness.ts), as the image and
 * `npm start` do: node on the compiled JavaScript, 0.7 s to answer `--help` where the sources through tsx take 1.8 s.
 * A few tests still start `bin/pont.js` on the sources, to test the launcher a checkout runs.
 */
import { execFile } from 'node:child_process';
import { rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import type { TestProject } from 'vitest/node';

declare module 'vitest' {
  export interface ProvidedContext {
    /** The compiled build of this run (absolute path), made by scripts/build.mjs. */
    pontBuild: string;
  }
}

const repo = fileURLToPath(new URL('..', import.meta.url));

// The projects that use it (postgres, pglite) each run this setup; the first builds, the last to finish removes it.
const shared = globalThis as typeof globalThis & { pontBuild?: { dir: string; built: Promise<void>; users: number } };

export default async function setup(project: TestProject): Promise<() => void> {
  if (!shared.pontBuild) {
    const dir = join(repo, `dist-test-${process.pid}`);
    const built = promisify(execFile)(process.execPath, [join(repo, 'scripts/build.mjs'), dir, '--no-check'], { cwd: repo }).then(
      () => undefined,
      (err: { stdout?: string; stderr?: string }) => {
        rmSync(dir, { recursive: true, force: true });
        throw new Error(`npm run build failed, so the tests that run pont cannot:\n${err.stdout ?? ''}${err.stderr ?? ''}`);
      },
    );
    shared.pontBuild = { dir, built, users: 0 };
  }
  const build = shared.pontBuild;
  build.users++;
  await build.built;
  project.provide('pontBuild', build.dir);
  return () => {
    if (--build.users === 0) rmSync(build.dir, { recursive: true, force: true });
  };
}
