// The child process of pglite-first-start.ts: initialises and migrates the data directory (argv[2]), then ends.
import { migrate } from './migrate';
import { openPglite } from './pglite';

// The server that started this one has gone (killed while starting): stop, rather than hold its data directory.
process.on('disconnect', () => process.exit(1));

let outcome: { applied?: string[]; error?: string };
try {
  const db = await openPglite(process.argv[2]!);
  try {
    outcome = { applied: await migrate(db) };
  } finally {
    await db.close();
  }
} catch (err) {
  outcome = { error: err instanceof Error ? err.message : String(err) };
}
process.send!(outcome, () => process.exit(0));
