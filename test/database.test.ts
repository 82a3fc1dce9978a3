import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../src/db/database';
import { openDatabase } from '../src/db/open';
import { listMigrations, migrate } from '../src/db/migrate';
import { arrayLiteral } from '../src/db/sql';
import { backend, createScratchDatabase } from './harness';
import { eventually } from './eventually';

let db: Database;
let drop: (() => Promise<void>) | undefined;
beforeAll(async () => {
  if (backend === 'postgres') {
    const scratch = await createScratchDatabase();
    drop = scratch.drop;
    db = await openDatabase({ databaseUrl: scratch.url });
  } else {
    db = await openDatabase({});
  }
  await migrate(db);
});
afterAll(async () => {
  await db?.close();
  await drop?.();
});

describe(`database (${backend})`, () => {
  it('applies every migration once; a second run applies nothing', async () => {
    const { rows } = await db.query<{ version: string }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(rows.map((r) => r.version)).toEqual(listMigrations().map((m) => m.version));
    expect(await migrate(db)).toEqual([]);
  });

  it('returns the same value types on both backends', async () => {
    const { rows } = await db.query<Record<string, unknown>>(
      `SELECT 9007199254740993::bigint AS big, 1.50::numeric AS num, 3::int AS small, now() AS ts, '{"a":1}'::jsonb AS doc, ARRAY['x','y'] AS arr`,
    );
    expect(rows[0]).toEqual({ big: '9007199254740993', num: '1.50', small: 3, ts: expect.any(Date), doc: { a: 1 }, arr: ['x', 'y'] });
  });

  it('reads an array literal (arrayLiteral) back as the values it was made of, hostile text included', async () => {
    const texts = [`x'); DROP TABLE fhir_resources; --"\\`, '', 'NULL', null, '{a,b}', 'a,b', ' spaced ', 'back\\slash\\', 'quo"te""', 'Ωμέγα 😀', 'line\nbreak'];
    const numbers = ['9007199254740993', '-1', null];
    const { rows } = await db.query<{ t: string | null; n: string | null }>('SELECT t, n::text FROM unnest($1::text[], $2::bigint[]) AS u(t, n)', [arrayLiteral(texts), arrayLiteral(numbers)]);
    expect(rows.map((r) => r.t)).toEqual(texts);
    expect(rows.map((r) => r.n)).toEqual([...numbers, ...Array(texts.length - numbers.length).fill(null)]);
  });

  it('commits a transaction that resolves and rolls back one that throws', async () => {
    await db.exec('CREATE TABLE tx_probe (v int)');
    await db.transaction(async (tx) => {
      await tx.query('INSERT INTO tx_probe VALUES (1)');
    });
    await expect(
      db.transaction(async (tx) => {
        await tx.query('INSERT INTO tx_probe VALUES (2)');
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    const { rows } = await db.query<{ v: number }>('SELECT v FROM tx_probe ORDER BY v');
    expect(rows).toEqual([{ v: 1 }]);
  });

  it('keeps other queries out of an open transaction', async () => {
    await db.exec('CREATE TABLE tx_isolation (v int)');
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const inTx = db.transaction(async (tx) => {
      await tx.query('INSERT INTO tx_isolation VALUES (1)');
      await gate;
      await tx.query('SELECT 1'); // the transaction goes on after the query outside it was issued
      throw new Error('roll back');
    });
    // Issued while the transaction is open: were it let into the transaction's connection, the rollback would undo it.
    const outside = db.query('INSERT INTO tx_isolation VALUES (2)');
    release();
    await expect(inTx).rejects.toThrow('roll back');
    await outside;
    const { rows } = await db.query<{ v: number }>('SELECT v FROM tx_isolation');
    expect(rows).toEqual([{ v: 2 }]);
  });
});

describe.runIf(backend === 'postgres')('migrations from several processes at once', () => {
  it('two first starts on one fresh database both succeed', async () => {
    const scratch = await createScratchDatabase();
    const [a, b] = await Promise.all([openDatabase({ databaseUrl: scratch.url }), openDatabase({ databaseUrl: scratch.url })]);
    try {
      const applied = await Promise.all([migrate(a), migrate(b)]);
      expect([...applied[0], ...applied[1]].sort()).toEqual(listMigrations().map((m) => m.version));
    } finally {
      await a.close();
      await b.close();
      await scratch.drop();
    }
  });
});

describe.runIf(backend === 'postgres')('a connection lost mid-transaction', () => {
  it('fails that transaction only; the process and the pool go on', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let begun!: (pid: number) => void;
    const backendPid = new Promise<number>((r) => (begun = r));
    const inTx = db.transaction(async (tx) => {
      begun((await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid);
      await gate;
      await tx.query('SELECT 1');
    });
    const pid = await backendPid;
    await db.query('SELECT pg_terminate_backend($1)', [pid]);
    // The connection has ended while idle in the transaction (its socket closed before the backend left the list).
    await eventually(async () => expect((await db.query('SELECT 1 FROM pg_stat_activity WHERE pid = $1', [pid])).rows).toEqual([]));
    release();
    await expect(inTx).rejects.toThrow();
    expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows).toEqual([{ one: 1 }]);
  });
});
