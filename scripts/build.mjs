// `npm run build [-- OUT_DIR]`: compiles src/ to dist/ (tsc, tsconfig.build.json) with source maps, then
//  - gives relative import specifiers their file (`./x` → `./x.js`, `./dir` → `./dir/index.js`): the sources
//    import without extensions (tsx and vitest resolve them), Node's ESM loader needs them spelled out;
//  - copies the files the code reads at run time beside its modules (the SQL migrations), and writes the reduced FHIR
//    definitions beside theirs.
// OUT_DIR (for tests) must sit directly under the repository, as dist/ does. `--no-check` (the tests' build,
// test/global-build.ts): no type check (`tsc -p .` does it), and an import it cannot resolve is left as written, to fail
// only if loaded, as under tsx: a module half-written in the checkout fails the tests that load it, not every one.
import { execFileSync } from 'node:child_process';
import { cpSync, existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const repo = fileURLToPath(new URL('..', import.meta.url));
const src = join(repo, 'src');
const noCheck = process.argv.includes('--no-check');
const out = resolve(repo, process.argv.slice(2).find((a) => a !== '--no-check') ?? 'dist');
if (dirname(out) !== resolve(repo)) throw new Error(`the build must go directly under ${repo}, not ${out}`);

const walk = (dir) => readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(join(dir, e.name)) : [join(dir, e.name)]));

rmSync(out, { recursive: true, force: true });
execFileSync(process.execPath, [join(repo, 'node_modules/typescript/bin/tsc'), '-p', join(repo, 'tsconfig.build.json'), '--outDir', out, ...(noCheck ? ['--noCheck'] : [])], { stdio: 'inherit' });

// tsc keeps the specifiers as written: static and dynamic imports, re-exports.
const SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])(\.\.?\/[^'"\n]*)\2/g;
for (const file of walk(out).filter((f) => f.endsWith('.js'))) {
  const code = readFileSync(file, 'utf8');
  const fixed = code.replace(SPECIFIER, (match, before, quote, spec) => {
    if (/\.(m?js|json)$/.test(spec)) return match;
    const target = resolve(dirname(file), spec);
    const suffix = existsSync(`${target}.js`) ? '.js' : existsSync(join(target, 'index.js')) ? '/index.js' : undefined;
    if (!suffix && noCheck) return match;
    if (!suffix) throw new Error(`${relative(repo, file)}: cannot resolve import '${spec}'`);
    return `${before}${quote}${spec}${suffix}${quote}`;
  });
  if (fixed !== code) writeFileSync(file, fixed);
}

// Everything under src/ that is not code: the migrations (the .mjs files start the sources' worker threads and processes, tsx only).
for (const file of walk(src).filter((f) => !/\.(ts|mjs)$/.test(f))) cpSync(file, join(out, relative(src, file)));
// The R4 definitions (StructureDefinitions, code systems, value sets) reduced to what is read of them, which every
// start then reads (src/core/fhir-definitions.ts).
(await import(pathToFileURL(join(out, 'core/fhir-definitions.js')).href)).writeReducedDefinitions();
console.log(`built ${relative(repo, out)}/ (${walk(out).filter((f) => f.endsWith('.js')).length} modules)`);
