import { randomBytes } from 'node:crypto';
import type { Database } from './database';

const CHANNEL = 'pont_listen_check';
/** How long a NOTIFY may take to reach this process's listening connection at start. */
const WAIT_MS = 5000;

/**
 * Proves at start that this process hears the database's NOTIFYs: revocations, key rotations and webhook wake-ups
 * reach the caches and workers that way. Through PgBouncer in transaction mode the LISTEN would sit on whichever
 * server connection ran it and nothing would be heard (a revoked client would go on being served): the start fails
 * then, naming DATABASE_LISTEN_URL.
 */
export async function checkListening(db: Database): Promise<void> {
  const nonce = randomBytes(12).toString('hex');
  let heard!: () => void;
  const notified = new Promise<void>((resolve) => (heard = resolve));
  const stop = await db.listen(CHANNEL, { notify: (payload) => payload === nonce && heard() });
  let timer: NodeJS.Timeout | undefined;
  try {
    await db.query('SELECT pg_notify($1, $2)', [CHANNEL, nonce]);
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () =>
          reject(
            new Error(
              `The database connection that LISTENs heard no NOTIFY within ${WAIT_MS / 1000} s: behind a pooler in transaction mode (PgBouncer), set DATABASE_LISTEN_URL to a URL straight to PostgreSQL (docs/operators.md "PgBouncer")`,
            ),
          ),
        WAIT_MS,
      );
    });
    await Promise.race([notified, late]);
  } finally {
    clearTimeout(timer);
    await stop();
  }
}
