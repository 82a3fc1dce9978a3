import { mkdtempSync, readFileSync, readdirSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { createReadStream } from 'node:fs';
import { x as extract } from 'tar';
import type { Bundle, BundleEntry, Resource } from '@medplum/fhirtypes';
import { sqlState, SqlState, type Database } from '../db/database';
import { ApiError } from '../core/errors';
import { importedFiles, importedResources } from '../metrics';
import { processBundle } from './bundle';
import { loadFhirDefinitions } from '../core/fhir-definitions';
import type { FhirRepository } from './repository';
import type { FhirService } from './service';

export interface ImportProgress {
  filesDone: number;
  filesTotal: number;
  resources: number;
  failures: ImportFailure[];
  /** Files that hold no FHIR resources (e.g. a bulk export's log.ndjson), left alone. */
  skipped: string[];
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

const SCRATCH_PREFIX = 'pont-import-';

/**
 * Removes archive extraction directories left by imports whose process is gone (killed before it could
 * clean up): their names carry the pid.
 */
function removeStaleScratch(): void {
  for (const name of readdirSync(tmpdir())) {
    const pid = Number(new RegExp(`^${SCRATCH_PREFIX}(\\d+)-`).exec(name)?.[1]);
    if (!pid || pid === process.pid) continue;
    try {
      process.kill(pid, 0); // still running: leave it
    } catch {
      rmSync(join(tmpdir(), name), { recursive: true, force: true });
    }
  }
}

/** Expands directories (recursively) and .tar.gz archives into the .json / .ndjson files to load. */
function listFiles(paths: string[], scratch: string[]): string[] {
  const out: string[] = [];
  const visit = (path: string) => {
    const stat = statSync(path);
    if (stat.isDirectory()) {
      for (const name of readdirSync(path).sort()) visit(join(path, name));
    } else if (/\.(tar\.gz|tgz)$/.test(path)) {
      const dir = mkdtempSync(join(tmpdir(), `${SCRATCH_PREFIX}${process.pid}-`));
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

/**
 * Runs one transaction Bundle, retrying when concurrent imports collide on shared resources. References
 * are checked once the whole import is done (files may refer to each other in any order).
 */
async function load(repo: FhirRepository, bundle: Bundle): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      const result = await processBundle(repo, bundle, { returnResources: false, deferReferenceCheck: true });
      return result.entry?.filter((e) => /^20[01]/.test(e.response?.status ?? '')).length ?? 0;
    } catch (err) {
      if (attempt < 5 && RETRYABLE.has(sqlState(err) ?? '')) continue;
      throw err;
    }
  }
}

/** Loads one file; 'skipped' for an ndjson file that holds no FHIR resources (e.g. a bulk export's log.ndjson). */
async function loadFile(repo: FhirRepository, file: string, onResources: (n: number) => void): Promise<'loaded' | 'skipped'> {
  if (file.endsWith('.ndjson')) {
    let chunk: Resource[] = [];
    let line = 0;
    let resources = 0;
    const lines = createInterface({ input: createReadStream(file, 'utf8'), crlfDelay: Infinity });
    for await (const text of lines) {
      line++;
      if (!text.trim()) continue;
      let value: Resource;
      try {
        value = JSON.parse(text) as Resource;
      } catch (err) {
        throw new Error(`line ${line}: malformed JSON (${(err as Error).message})`);
      }
      if (resources++ === 0 && (typeof value !== 'object' || value === null || !('resourceType' in value))) {
        lines.close();
        return 'skipped';
      }
      chunk.push(value);
      if (chunk.length >= NDJSON_CHUNK) {
        onResources(await load(repo, asTransaction(chunk)));
        chunk = [];
      }
    }
    if (chunk.length) onResources(await load(repo, asTransaction(chunk)));
    return 'loaded';
  }
  const json = JSON.parse(readFileSync(file, 'utf8')) as Resource;
  if (json.resourceType === 'Bundle' && (json.type === 'transaction' || json.type === 'batch')) {
    onResources(await load(repo, json));
  } else if (json.resourceType === 'Bundle') {
    onResources(await load(repo, asTransaction((json.entry ?? []).map((e) => e.resource!).filter(Boolean))));
  } else {
    onResources(await load(repo, asTransaction([json])));
  }
  return 'loaded';
}

/**
 * Loads every file; each file (or ndjson chunk) is one transaction, so a bad file is reported and
 * leaves nothing half-loaded while the others go on.
 */
export async function importPaths(
  fhir: FhirService,
  paths: string[],
  options: { concurrency?: number; onProgress?: (p: ImportProgress) => void } = {},
): Promise<ImportSummary> {
  loadFhirDefinitions();
  removeStaleScratch();
  const repo = fhir.system('import');
  const started = performance.now();
  const since = new Date(Date.now() - 1000).toISOString();
  const scratch: string[] = [];
  const cleanUp = () => {
    for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  };
  // A signal ends the process without unwinding `finally`: remove the extracted archives first.
  const onSignal = (signal: NodeJS.Signals) => {
    cleanUp();
    process.kill(process.pid, signal);
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    const files = listFiles(paths, scratch);
    const progress: ImportProgress = { filesDone: 0, filesTotal: files.length, resources: 0, failures: [], skipped: [] };
    let next = 0;
    const worker = async () => {
      while (next < files.length) {
        const file = files[next++];
        try {
          const outcome = await loadFile(repo, file, (n) => {
            progress.resources += n;
            importedResources.inc(n);
            options.onProgress?.(progress);
          });
          if (outcome === 'skipped') progress.skipped.push(shortName(file));
          importedFiles.inc({ outcome });
        } catch (err) {
          importedFiles.inc({ outcome: 'failed' });
          const message = err instanceof ApiError || err instanceof Error ? err.message : String(err);
          progress.failures.push({ file: shortName(file), message });
        }
        progress.filesDone++;
        options.onProgress?.(progress);
      }
    };
    await Promise.all(Array.from({ length: Math.max(1, options.concurrency ?? 1) }, worker));
    for (const dangling of await danglingReferences(fhir, since)) progress.failures.push(dangling);
    return { ...progress, seconds: (performance.now() - started) / 1000 };
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
    cleanUp();
  }
}

/** A file as the summary names it: inside an archive, its path there. */
const shortName = (file: string) => file.replace(new RegExp(`^.*${SCRATCH_PREFIX}[^/]+/`), '');

/** The most dangling references an import lists one by one. */
const MAX_DANGLING_LISTED = 100;

/**
 * References written since `since` (by this import, or anything else meanwhile) to resources that do not
 * exist: the import's deferred referential-integrity check, one indexed query.
 */
async function danglingReferences(fhir: FhirService, since: string): Promise<ImportFailure[]> {
  const { rows } = await fhir.db.query<{ resource_type: string; id: string; path: string; target_type: string; target_id: string; n: string }>(
    `SELECT s.resource_type, s.id, l.path, l.target_type, l.target_id, count(*) OVER () AS n
     FROM fhir_resources s JOIN fhir_links l ON l.rid = s.rid
     WHERE s.last_updated >= $1 AND NOT s.deleted
       AND NOT EXISTS (SELECT 1 FROM fhir_resources t WHERE t.resource_type = l.target_type AND t.id = l.target_id AND NOT t.deleted)
     ORDER BY s.rid LIMIT $2`,
    [since, MAX_DANGLING_LISTED],
  );
  const failures = rows.map((r) => ({
    file: `${r.resource_type}/${r.id}`,
    message: `${r.path} refers to ${r.target_type}/${r.target_id}, which does not exist`,
  }));
  const total = Number(rows[0]?.n ?? 0);
  if (total > rows.length) failures.push({ file: '(more)', message: `${total - rows.length} more dangling references` });
  return failures;
}

function progressLine(p: ImportProgress, started: number): string {
  const width = 30;
  const done = p.filesTotal ? Math.round((p.filesDone / p.filesTotal) * width) : 0;
  const rate = p.resources / Math.max(0.001, (performance.now() - started) / 1000);
  return `[${'#'.repeat(done)}${'.'.repeat(width - done)}] ${p.filesDone}/${p.filesTotal} files  ${p.resources.toLocaleString('en')} resources  ${Math.round(rate).toLocaleString('en')}/s  ${p.failures.length} failed`;
}

/** How the command reaches the store: the CLI (src/cli.ts) opens the configured database and builds the FHIR service on it. */
export type WithFhirService = (run: (fhir: FhirService, db: Database) => Promise<number>) => Promise<number>;

/** `pont import PATH... [--concurrency N]` */
export async function importCommand(args: string[], withFhirService: WithFhirService): Promise<number> {
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
  return withFhirService(async (fhir, db) => {
    const started = performance.now();
    const tty = process.stderr.isTTY;
    let lastDraw = 0;
    const summary = await importPaths(fhir, paths, {
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
    for (const f of summary.skipped) console.log(`  skipped ${f}: no FHIR resources in it`);
    for (const f of summary.failures) console.log(`  FAILED ${f.file}: ${f.message}`);
    return summary.failures.length ? 1 : 0;
  });
}
