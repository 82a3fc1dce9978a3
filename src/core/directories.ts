import { mkdirSync, statSync } from 'node:fs';
import { mkdir, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';

/**
 * `mkdir -p`, for the directories an operator names (PONT_DATA_DIR, PONT_BULK_EXPORT_DIR, AUDIT_ARCHIVE_DIR, an
 * agent's queue_dir). Node's own `mkdir(path, { recursive: true })` (20 and 22) never returns when a directory that
 * exists cannot hold the child asked of it and says so with ENOENT: a path under /proc, or under a symbolic link to
 * nowhere. Its walk takes ENOENT for "the parent is missing", makes the parent (EEXIST: there already), tries the
 * child again and meets ENOENT again, at 100% of a core, forever. Here the missing directories are found first,
 * then made once each from the top: whatever stops one is thrown (ENOENT, EACCES, EROFS, ENOTDIR, EEXIST for a file).
 */
export function makeDirectorySync(path: string, mode = 0o777): void {
  for (const dir of missingDirectories(path, (p) => statSync(p).isDirectory())) {
    try {
      mkdirSync(dir, { mode });
    } catch (err) {
      // Made meanwhile by another process: fine, if it is a directory (statSync throws if it is not there).
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !statSync(dir).isDirectory()) throw err;
    }
  }
}

/** makeDirectorySync, without blocking the event loop. */
export async function makeDirectory(path: string, mode = 0o777): Promise<void> {
  const missing: string[] = [];
  let dir = resolve(path);
  for (;;) {
    const found = await stat(dir).then(
      (s) => s.isDirectory(),
      (err: NodeJS.ErrnoException) => {
        if (err.code !== 'ENOENT' || dirname(dir) === dir) throw err;
        return undefined;
      },
    );
    if (found !== undefined) {
      if (!found) missing.push(dir); // a file where a directory is asked: mkdir says EEXIST or ENOTDIR
      break;
    }
    missing.push(dir);
    dir = dirname(dir);
  }
  for (const next of missing.reverse()) {
    try {
      await mkdir(next, { mode });
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || !(await stat(next)).isDirectory()) throw err;
    }
  }
}

/** The directories of `path` that are not there, from the top down: `path` and its parents up to one that exists. */
function missingDirectories(path: string, isDirectory: (path: string) => boolean): string[] {
  const missing: string[] = [];
  let dir = resolve(path);
  for (;;) {
    let found: boolean;
    try {
      found = isDirectory(dir);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || dirname(dir) === dir) throw err;
      missing.push(dir);
      dir = dirname(dir);
      continue;
    }
    if (!found) missing.push(dir); // a file where a directory is asked: mkdir says EEXIST or ENOTDIR
    return missing.reverse();
  }
}
