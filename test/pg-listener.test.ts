import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LISTENER_APPLICATION_NAME, PgListener } from '../src/db/pg-listener';
import { backend, createScratchDatabase } from './harness';

/**
 * The listening connection's promise to the caches: once caughtUp() resolves, either every notification committed
 * before it has arrived, or the handlers have been told the connection is lost (and stop trusting what they hold).
 */
describe.runIf(backend === 'postgres')('PostgreSQL listening connection', () => {
  let scratch: Awaited<ReturnType<typeof createScratchDatabase>>;
  let admin: pg.Client;
  beforeAll(async () => {
    scratch = await createScratchDatabase();
    admin = new pg.Client({ connectionString: scratch.url });
    await admin.connect();
  });
  afterAll(async () => {
    await admin?.end();
    await scratch?.drop();
  });

  it('a connection terminated just before caughtUp() is reported lost by the time it resolves, every time', async () => {
    const listener = new PgListener(scratch.url);
    let listening = false;
    const heard: string[] = [];
    let ready!: () => void;
    let isReady = new Promise<void>((r) => (ready = r));
    await listener.listen('pont_listener_test', {
      notify: (payload) => heard.push(payload),
      ready: () => {
        listening = true;
        ready();
      },
      lost: () => (listening = false),
    });
    try {
      for (let round = 0; round < 10; round++) {
        await isReady;
        expect(listening).toBe(true);
        isReady = new Promise<void>((r) => (ready = r));
        // pg_terminate_backend signals and returns: the backend may still be alive when the NOTIFY commits.
        const cut = await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND application_name = $1', [
          LISTENER_APPLICATION_NAME,
        ]);
        expect(cut.rowCount).toBe(1);
        await admin.query(`NOTIFY pont_listener_test, 'r${round}'`);
        await listener.caughtUp();
        // Still trusted only if the notification arrived.
        expect({ round, trusted: listening, heard: heard.includes(`r${round}`) }).not.toMatchObject({ trusted: true, heard: false });
      }
    } finally {
      await listener.close();
    }
  }, 60_000);

  it('a channel listened to while the connection is just opening hears its NOTIFY (a listen() in the step after ready() was never sent)', async () => {
    const listener = new PgListener(scratch.url);
    const heard: string[] = [];
    let second: Promise<unknown> | undefined;
    try {
      await listener.listen('pont_listener_first', {
        notify: () => undefined,
        // What a ready() handler starts runs before the connection counts as open (e.g. a wake-up that listens on).
        ready: () => queueMicrotask(() => (second ??= listener.listen('pont_listener_second', { notify: (payload) => heard.push(payload) }))),
      });
      await second;
      await admin.query(`SELECT pg_notify('pont_listener_second', 'heard')`);
      await listener.caughtUp();
      expect(heard).toEqual(['heard']);
    } finally {
      await listener.close();
    }
  });
});
