import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { withDatabase } from '../../db/command';
import { ApiError } from '../../core/errors';
import { loadResource, resourcesOf } from './files';
import { TerminologyLoader, type Loaded } from './load';
import { isLoincTable, loadLoincCsv, loadRf2, rf2Files } from './release';

export interface LoadFailure {
  file: string;
  message: string;
}

/**
 * `pont terminology load FILE…`: every CodeSystem, ValueSet and ConceptMap of the files, each loaded whole or not at
 * all (a version replaced atomically). Prints `{loaded, failures, seconds}` as JSON; exit code 1 if anything failed.
 */
export async function loadTerminologyCommand(paths: string[], options: { version?: string } = {}): Promise<number> {
  const started = Date.now();
  const files: string[] = [];
  const visit = (path: string, top: boolean) => {
    if (!existsSync(path)) throw new Error(`${path}: no such file`);
    if (statSync(path).isDirectory()) for (const name of readdirSync(path).sort()) visit(join(path, name), false);
    else if (top || /\.(json|ndjson|txt|csv)$/i.test(path)) files.push(path);
  };
  for (const p of paths) visit(p, true);
  const loaded: Loaded[] = [];
  const failures: LoadFailure[] = [];
  await withDatabase(async (db) => {
    const loader = new TerminologyLoader(db);
    await loader.cleanUp();
    const rf2 = rf2Files(files);
    const release = async (name: string, load: () => Promise<Loaded>) => {
      try {
        loaded.push(await load());
      } catch (err) {
        if (!(err instanceof ApiError)) throw err;
        failures.push({ file: name, message: err.message });
      }
    };
    if (rf2) await release(rf2.concept, () => loadRf2(loader, rf2));
    const rest: string[] = [];
    for (const f of files) {
      if (rf2 && Object.values(rf2).includes(f)) continue;
      if (/\.txt$/i.test(f)) failures.push({ file: f, message: 'an RF2 file is loaded with its sct2_Concept_…txt snapshot file' });
      else rest.push(f);
    }
    for (const file of rest.filter(isLoincTable)) await release(file, () => loadLoincCsv(loader, file, options.version));
    for (const file of rest.filter((f) => !isLoincTable(f))) {
      try {
        for await (const resource of resourcesOf(file)) {
          try {
            loaded.push(await loadResource(loader, resource));
          } catch (err) {
            if (!(err instanceof ApiError)) throw err;
            failures.push({ file, message: `${resource.resourceType} ${String(resource.url)}: ${err.message.replace(/^(CodeSystem|ValueSet|ConceptMap) \S+: /, '')}` });
          }
        }
      } catch (err) {
        if (!(err instanceof ApiError) && !(err instanceof RangeError)) throw err;
        failures.push({ file, message: err.message });
      }
    }
  });
  const summary = { loaded, failures, seconds: Math.round((Date.now() - started) / 100) / 10 };
  console.log(JSON.stringify(summary, null, 2));
  for (const l of loaded) if (l.warning) console.error(`${l.resourceType} ${l.url}: warning: ${l.warning}`);
  for (const f of failures) console.error(`${f.file}: ${f.message}`);
  return failures.length ? 1 : 0;
}
