import { existsSync, statSync } from 'node:fs';
import { withDatabase } from '../../db/command';
import { ApiError } from '../../core/errors';
import { loadResource, resourcesOf } from './files';
import { TerminologyLoader, type Loaded } from './load';

export interface LoadFailure {
  file: string;
  message: string;
}

/**
 * `pont terminology load FILE…`: every CodeSystem, ValueSet and ConceptMap of the files, each loaded whole or not at
 * all (a version replaced atomically). Prints `{loaded, failures, seconds}` as JSON; exit code 1 if anything failed.
 */
export async function loadTerminologyCommand(files: string[]): Promise<number> {
  const started = Date.now();
  for (const f of files) if (!existsSync(f) || !statSync(f).isFile()) throw new Error(`${f}: no such file`);
  const loaded: Loaded[] = [];
  const failures: LoadFailure[] = [];
  await withDatabase(async (db) => {
    const loader = new TerminologyLoader(db);
    await loader.cleanUp();
    for (const file of files) {
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
  for (const f of failures) console.error(`${f.file}: ${f.message}`);
  return failures.length ? 1 : 0;
}
