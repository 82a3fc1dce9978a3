/**
 * Where does import time go? Loads the first N sample bundles through `importPaths` on a fresh
 * database while the V8 CPU profiler runs, then prints self time by function and by module
 * (a package under node_modules, or a file of ours), and writes the .cpuprofile (open it in Chrome
 * DevTools or speedscope).
 *
 *   npx tsx bench/import-profile.ts [--backend pglite|postgres] [--bundles N] [--samples PATH]
 *   npx tsx bench/import-profile.ts --summary FILE.cpuprofile     (the same summary of any profile)
 *
 * On PGlite the database runs in this thread (WebAssembly), so its time shows up here too; on
 * PostgreSQL the server's time does not (it shows as idle time waiting on the socket).
 */
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { Session, type Profiler } from 'node:inspector/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { x as extract } from 'tar';
import { openDatabase } from '../src/db/open';
import { migrate } from '../src/db/migrate';
import { loadFhirDefinitions } from '../src/core/fhir-definitions';
import { importPaths } from '../src/fhir/import';
import { createFhirService } from '../src/services';
import { loadConfig } from '../src/config';
import { loadMappings } from '../src/mapping/index';
import { createScratchDatabase } from '../test/harness';

const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const { values } = parseArgs({
  options: {
    backend: { type: 'string', default: 'pglite' },
    bundles: { type: 'string', default: '10' },
    samples: { type: 'string', default: join(repoRoot, 'samples', 'synthea-r4-50-patients.tar.gz') },
    summary: { type: 'string' },
  },
});

if (values.summary) printProfile(JSON.parse(readFileSync(values.summary, 'utf8')) as Profiler.Profile);
else await profileImport(values.backend as 'pglite' | 'postgres', Number(values.bundles), resolve(values.samples));

async function profileImport(backend: 'pglite' | 'postgres', bundles: number, samples: string): Promise<void> {
  const scratchDir = mkdtempSync(join(tmpdir(), 'pont-import-profile-'));
  const bundlesDir = join(scratchDir, 'bundles');
  mkdirSync(bundlesDir);
  extract({ file: samples, cwd: bundlesDir, sync: true });
  const files = readdirSync(bundlesDir).filter((f) => f.endsWith('.json')).sort();
  for (const f of files.slice(bundles)) rmSync(join(bundlesDir, f));

  const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
  const db = await openDatabase(scratch ? { databaseUrl: scratch.url } : { dataDir: join(scratchDir, 'pglite') });
  try {
    await migrate(db);
    loadFhirDefinitions();
    const fhir = createFhirService(db, loadConfig({ PONT_PUBLIC_URL: 'http://localhost' }), loadMappings());

    const session = new Session();
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 500 });
    await session.post('Profiler.start');
    const summary = await importPaths(fhir, [bundlesDir], { concurrency: backend === 'postgres' ? 2 : 1 });
    const { profile } = (await session.post('Profiler.stop')) as { profile: Profiler.Profile };
    session.disconnect();

    const out = join(repoRoot, 'bench', 'results', `import-${backend}.cpuprofile`);
    mkdirSync(dirname(out), { recursive: true });
    writeFileSync(out, JSON.stringify(profile));
    console.log(
      `${backend}: ${summary.resources} resources from ${summary.filesTotal} bundles in ${summary.seconds.toFixed(1)} s = ${Math.round(summary.resources / summary.seconds)}/s, ${summary.failures.length} failures`,
    );
    printProfile(profile);
    console.log(`profile written to ${out}`);
  } finally {
    await db.close();
    await scratch?.drop();
    rmSync(scratchDir, { recursive: true, force: true });
  }
}

/** A package under node_modules, `node internals`, a file of ours, or the V8 pseudo-frame. */
function moduleOf(callFrame: Profiler.ProfileNode['callFrame']): string {
  const url = callFrame.url.replace(/^file:\/\//, '');
  if (!url) return `(${callFrame.functionName || 'native'})`;
  if (url.includes('/node_modules/')) return url.replace(/^.*\/node_modules\/((@[^/]+\/)?[^/]+).*$/, '$1');
  if (url.startsWith('node:')) return 'node internals';
  return url.replace(repoRoot + '/', '');
}

function printProfile(profile: Profiler.Profile): void {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const counts = new Map<number, number>();
  for (const s of profile.samples ?? []) counts.set(s, (counts.get(s) ?? 0) + 1);
  const total = profile.samples?.length ?? 1;
  const msPer = (profile.endTime - profile.startTime) / 1000 / total;
  const fn = new Map<string, number>();
  const mod = new Map<string, number>();
  for (const [id, n] of counts) {
    const { callFrame } = byId.get(id)!;
    const module = moduleOf(callFrame);
    // (No line numbers: tsx's transformed code does not keep the source's lines.)
    const name = `${callFrame.functionName || '(anonymous)'}  ${module}`;
    fn.set(name, (fn.get(name) ?? 0) + n);
    mod.set(module, (mod.get(module) ?? 0) + n);
  }
  const top = (m: Map<string, number>, k: number) =>
    [...m.entries()]
      .sort((a, b) => b[1] - a[1])
      .slice(0, k)
      .map(([name, n]) => `  ${((100 * n) / total).toFixed(1).padStart(5)}%  ${(n * msPer).toFixed(0).padStart(7)} ms  ${name}`)
      .join('\n');
  // Inclusive time of our own functions (src/, and dist/ of a process run from the build, such as the agent): a sample
  // counts once per function on its stack.
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const ours = new Map<string, number>();
  const modules = new Map<string, number>();
  for (const [id, n] of counts) {
    const seenModules = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const m = moduleOf(byId.get(at)!.callFrame);
      if (!seenModules.has(m)) modules.set(m, (modules.get(m) ?? 0) + n);
      seenModules.add(m);
    }
    const seen = new Set<string>();
    for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
      const { callFrame } = byId.get(at)!;
      const url = callFrame.url.replace(/^file:\/\//, '');
      if (!url.startsWith(repoRoot + '/src/') && !url.startsWith(repoRoot + '/dist/')) continue;
      const name = `${callFrame.functionName || '(anonymous)'}  ${url.replace(repoRoot + '/', '')}`;
      if (seen.has(name)) continue;
      seen.add(name);
      ours.set(name, (ours.get(name) ?? 0) + n);
    }
  }
  console.log(`\nself time by module (${total} samples, ${(total * msPer / 1000).toFixed(1)} s):\n${top(mod, 15)}`);
  console.log(`\nself time by function:\n${top(fn, 25)}`);
  console.log(`\ninclusive time by module (a sample counts once per module on its stack):\n${top(modules, 20)}`);
  console.log(`\ninclusive time of our functions:\n${top(ours, 25)}`);
}
