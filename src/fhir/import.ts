import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createReadStream } from 'node:fs';
import { x as extract } from 'tar';
import type { Bundle, BundleEntry, Resource } from '@medplum/fhirtypes';
import { loadConfig } from '../config';
import { sqlState, SqlState } from '../db/database';
import { withDatabase } from '../cli';
import { ApiError } from '../http/errors';
import { processBundle } from './bundle';
import { loadFhirDefinitions } from './definitions';
import { FhirStore } from './store';

export interface ImportProgress {
  filesDone: number;
  filesTotal: number;
  resources: number;
  failures: ImportFailure[];
}

export interface ImportFailure {
  file: string;
  message: string;
}

export interface ImportSummary extends ImportProgress {
  seconds: number;
}

/** Resources of one ndjson transaction: large enough to amortise commits, small enough to retry. */
const NDJSON_CHUNK = 250;

/** Expands directories (recursively) and .tar.gz archives into the .json / .ndjson files to load. */
function listFiles(paths: string[], scratch: string[]): string[] {
  const out: string[] = [];
  const visit = (path: string) => {
    const stat = statSync(path);
    if (stat.isDirectory()) {
      for (const name of readdirSync(path).sort()) visit(join(path, name));
    } else if (/\.(tar\.gz|tgz)$/.test(path)) {
      const dir = mkdtempSync(join(tmpdir(), 'pont-import-'));
      scratch.push(dir);
      extract({ file: path, cwd: dir, sync: true });
      visit(dir);
    } else if (/\.(json|ndjson)$/.test(path)) {
      out.push(path);
    }
  };
  for (const p of paths) visit(p);
  return out;
}

/** A whole file as entries: a transaction/batch Bundle as it is; anything else as PUT (id given) or POST. */
function asTransaction(resources: Resource[]): Bundle {
  return {
    resourceType: 'Bundle',
    type: 'transaction',
    entry: resources.map(
      (resource): BundleEntry => ({
        resource,
        request: resource.id ? { method: 'PUT', url: `${resource.resourceType}/${resource.id}` } : { method: 'POST', url: resource.resourceType },
      }),
    ),
  };
}

const RETRYABLE = new Set<string>([SqlState.deadlockDetected, SqlState.serializationFailure, SqlState.uniqueViolation]);

/** Runs one transaction Bundle, retrying when concurrent imports collide on shared resources. */
async function load(store: FhirStore, bundle: Bundle): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await processBundle(store, bundle, { returnResources: false });
      return result.entry?.filter((e) => /^20[01]/.test(e.response?.status ?? '')).length ?? 0;
    } catch (err) {
      if (attempt < 5 && RETRYABLE.has(sqlState(err) ?? '')) continue;
      throw err;
    }
  }
}

async function loadFile(store: FhirStore, file: string, onResources: (n: number) => void): Promise<void> {
  if (file.endsWith('.ndjson')) {
    let chunk: Resource[] = [];
    let line = 0;
    const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
    for await (const text of lines) {
      line++;
      if (!text.trim()) continue;
      try {
        chunk.push(JSON.parse(text) as Resource);
      } catch (err) {
        throw new Error(`line ${line}: malformed JSON (${(err as Error).message})`);
      }
      if (chunk.length >= NDJSON_CHUNK) {
        onResources(await load(store, asTransaction(chunk)));
        chunk = [];
      }
    }
    if (chunk.length) onResources(await load(store, asTransaction(chunk)));
    return;
  }
  const json = JSON.parse(readFileSync(file, 'utf8')) as Resource;
  if (json.resourceType === 'Bundle' && (json.type === 'transaction' || json.type === 'batch')) {
    onResources(await load(store, json));
  } else if (json.resourceType === 'Bundle') {
    onResources(await load(store, asTransaction((json.entry ?? []).map((e) => e.resource!).filter(Boolean))));
  } else {
    onResources(await load(store, asTransaction([json])));
  }
}

/**
 * Loads every file; each file (or ndjson chunk) is one transaction, so a bad file is reported and
 * leaves nothing half-loaded while the others go on.
 */
export async function importPaths(
  store: FhirStore,
  paths: string[],
  options: { concurrency?: number; onProgress?: (p: ImportProgress) => void } = {},
): Promise<ImportSummary> {
  loadFhirDefinitions();
  const started = performance.now();
  const scratch: string[] = [];
  try {
    const files = listFiles(paths, scratch);
    const progress: ImportProgress = { filesDone: 0, filesTotal: files.length, resources: 0, failures: [] };
    let next = 0;
    const worker = async () => {
      while (next < files.length) {
        const file = files[next++];
        try {
          await loadFile(store, file, (n) => {
            progress.resources += n;
            options.onProgress?.(progress);
          });
        } catch (err) {
          const message = err instanceof ApiError || err instanceof Error ? err.message : String(err);
          progress.failures.push({ file: file.replace(/^.*pont-import-[^/]+\//, ''), message });
        }
        progress.filesDone++;
        options.onProgress?.(progress);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 1) }, worker));
    return { ...progress, seconds: (performance.now() - started) / 1000 };
  } finally {
    for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  }
}

function progressLine(p: ImportProgress, started: number): string {
  const width = 30;
  const done = p.filesTotal ? Math.round((p.filesDone / p.filesTotal) * width) : 0;
  const rate = p.resources / Math.max(0.001, (performance.now() - started) / 1000);
  return `[${'#'.repeat(done)}${'.'.repeat(width - done)}] ${p.filesDone}/${p.filesTotal} files  ${p.resources.toLocaleString('en')} resources  ${Math.round(rate).toLocaleString('en')}/s  ${p.failures.length} failed`;
}

/** `pont import PATH... [--concurrency N]` */
export async function importCommand(args: string[]): Promise<number> {
  const paths: string[] = [];
  let concurrency: number | undefined;
  for (let i = 0; i < args.length; i++) {
    if (args[i] === '--concurrency') concurrency = Number(args[++i]);
    else paths.push(args[i]);
  }
  if (!paths.length || (concurrency !== undefined && !(concurrency >= 1 && concurrency <= 16))) {
    console.error('Usage: pont import PATH... [--concurrency 1-16]   (PATH: .json, .ndjson, .tar.gz or a directory)');
    return 1;
  }
  const config = loadConfig();
  return withDatabase(async (db) => {
    const store = new FhirStore(db, () => `${config.publicUrl}/api/fhir/R4`);
    const started = performance.now();
    const tty = process.stderr.isTTY;
    let lastDraw = 0;
    const summary = await importPaths(store, paths, {
      concurrency: concurrency ?? (db.backend === 'postgres' ? 2 : 1),
      onProgress: (p) => {
        const now = performance.now();
        if (!tty || now - lastDraw < 100) return;
        lastDraw = now;
        process.stderr.write(`\r${progressLine(p, started)}`);
      },
    });
    if (tty) process.stderr.write(`\r${progressLine(summary, started)}\n`);
    const rate = Math.round(summary.resources / Math.max(0.001, summary.seconds));
    console.log(
      `Imported ${summary.resources} resources from ${summary.filesTotal} files in ${summary.seconds.toFixed(1)} s (${rate} resources/s); ${summary.failures.length} failures`,
    );
    for (const f of summary.failures) console.log(`  FAILED ${f.file}: ${f.message}`);
    return summary.failures.length ? 1 : 0;
  });
}
