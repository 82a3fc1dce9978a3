import { createReadStream, type ReadStream } from 'node:fs';
import { open, readdir, rm, stat, type FileHandle } from 'node:fs/promises';
import { join } from 'node:path';
import { makeDirectory } from '../core/directories';

/** A part being written: lines are appended, then `finish` makes it durable (or `discard` removes it). */
export interface PartWriter {
  write(text: string): Promise<void>;
  /** Flushes the file to disk (fsync) and closes it: its row may be committed then. Returns its size. */
  finish(): Promise<number>;
  /** Closes and removes the file (the part's transaction did not commit, or the part is empty). */
  discard(): Promise<void>;
}

/**
 * The ndjson files of bulk exports, one directory per job under `dir` (PONT_BULK_EXPORT_DIR): `<job>/<part>.ndjson`.
 * A part's row (bulk_export_parts) is what publishes it: the file is written and synced first, in the row's
 * transaction, so a committed row always has its whole file; a file without a row (its writer died before the
 * commit) is never served, and goes with its job's directory. Every process that serves an export's files must see
 * the same directory (one host: a local directory; several: a shared volume), as it sees the same database.
 */
export class ExportFiles {
  constructor(readonly dir: string) {}

  /** Job ids are random hex (bulk_export_jobs.id); anything else never reaches the filesystem. */
  private jobDir(jobId: string): string {
    if (!/^[0-9a-f]{32}$/.test(jobId)) throw new Error(`not a bulk export job id: ${JSON.stringify(jobId)}`);
    return join(this.dir, jobId);
  }

  private path(jobId: string, part: number | string): string {
    return join(this.jobDir(jobId), `${Number(part)}.ndjson`);
  }

  async writer(jobId: string, part: number | string): Promise<PartWriter> {
    const path = this.path(jobId, part);
    const jobDir = this.jobDir(jobId);
    await makeDirectory(jobDir, 0o700);
    // 'wx': a part number is used once (a sequence), so an existing file is a bug, not something to overwrite.
    const file: FileHandle = await open(path, 'wx', 0o600);
    let closed = false;
    const close = async () => {
      if (!closed) await file.close();
      closed = true;
    };
    return {
      // writeFile, not write: one write(2) may write less than asked (disk full, a file size limit) and say so only
      // in its count; writeFile goes on until all is written or fails.
      write: (text) => file.writeFile(text),
      async finish() {
        await file.sync();
        const { size } = await file.stat();
        await close();
        // The directory too: a new file's name is in it, and a crash could lose it after the row commits.
        const dir = await open(jobDir, 'r');
        await dir.sync().finally(() => dir.close());
        return size;
      },
      async discard() {
        await close().catch(() => undefined);
        await rm(path, { force: true });
      },
    };
  }

  /**
   * The part's bytes, streamed in fs's 64 KiB chunks (1 MiB chunks are memory outside V8's heap that makes it collect
   * sooner: other clients' reads waited longer during downloads, bench:bulk); 'missing' when the file is not here whole
   * (`bytes` long).
   */
  async read(jobId: string, part: number, bytes: number): Promise<ReadStream | 'missing'> {
    const path = this.path(jobId, part);
    const size = await stat(path).then((s) => s.size, () => undefined);
    if (size !== bytes) return 'missing';
    return createReadStream(path);
  }

  /**
   * Removes a job's files (cancelled, failed, expired). An error (the directory not writable, not a directory) is
   * returned, not thrown: the job's rows go all the same, and `sweep` tries again.
   */
  async remove(jobId: string): Promise<Error | undefined> {
    return rm(this.jobDir(jobId), { recursive: true, force: true }).then(
      () => undefined,
      (err: Error) => err,
    );
  }

  /**
   * The job directories whose job is gone (`exists` says which ids still have a row), untouched for `minAgeMs` at
   * least: what `remove` could not remove, and a directory whose rows were deleted without it. The age spares a
   * directory being made for a job whose row another transaction has not committed yet.
   */
  async sweep(exists: (ids: string[]) => Promise<Set<string>>, minAgeMs: number, now: number): Promise<{ removed: string[]; failed: Error[] }> {
    const names = await readdir(this.dir).catch(() => [] as string[]);
    const ids = names.filter((n) => /^[0-9a-f]{32}$/.test(n));
    const live = ids.length ? await exists(ids) : new Set<string>();
    const removed: string[] = [];
    const failed: Error[] = [];
    for (const id of ids) {
      if (live.has(id)) continue;
      const age = await stat(this.jobDir(id)).then((s) => now - s.mtimeMs, () => -1);
      if (age < minAgeMs) continue;
      const err = await this.remove(id);
      if (err) failed.push(err);
      else removed.push(id);
    }
    return { removed, failed };
  }
}
