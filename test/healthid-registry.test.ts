/** The Health ID registry on a real database: collisions are retried, a taken match key returns its holder. */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../src/db/database';
import { migrate } from '../src/db/migrate';
import { openDatabase } from '../src/db/open';
import { generateHealthId } from '../src/healthid/healthid';
import { attachPatient, findByHealthId, findByMatchKey, reserveHealthId } from '../src/healthid/registry';
import { backend, createScratchDatabase } from './harness';

let db: Database;
let drop: (() => Promise<void>) | undefined;
beforeAll(async () => {
  const scratch = backend === 'postgres' ? await createScratchDatabase() : undefined;
  drop = scratch?.drop;
  db = await openDatabase(scratch ? { databaseUrl: scratch.url } : {});
  await migrate(db);
});
afterAll(async () => {
  await db?.close();
  await drop?.();
});

/** Yields the given IDs in turn, then fresh random ones; counts the calls. */
function scripted(...ids: string[]) {
  const fn = (country: string) => {
    fn.calls++;
    return ids.shift() ?? generateHealthId(country);
  };
  fn.calls = 0;
  return fn;
}

describe(`Health ID registry (${backend})`, () => {
  it('draws another ID when the candidate is already taken', async () => {
    const taken = generateHealthId('CM');
    await db.transaction(async (tx) => {
      await reserveHealthId(tx, 'CM', 'key-taken', scripted(taken));
      await attachPatient(tx, taken, 'patient-1');
    });
    const generate = scripted(taken, taken);
    const fresh = await db.transaction(async (tx) => {
      const reservation = await reserveHealthId(tx, 'CM', 'key-new', generate);
      if (!('reserved' in reservation)) throw new Error('expected a reservation');
      await attachPatient(tx, reservation.reserved, 'patient-2');
      return reservation.reserved;
    });
    expect(generate.calls).toBe(3);
    expect(fresh).not.toBe(taken);
    expect(await findByHealthId(db, fresh)).toEqual({ healthId: fresh, patientId: 'patient-2', countryCode: 'CM' });
    expect(await findByHealthId(db, taken)).toEqual({ healthId: taken, patientId: 'patient-1', countryCode: 'CM' });
  });

  it('returns the holder of a match key instead of reserving', async () => {
    const first = await findByMatchKey(db, 'key-taken');
    const reservation = await db.transaction((tx) => reserveHealthId(tx, 'NG', 'key-taken'));
    expect(reservation).toEqual({ existing: first });
  });

  it('gives up after a bounded number of collisions, leaving nothing behind', async () => {
    const taken = (await findByMatchKey(db, 'key-taken'))!.healthId;
    const generate = scripted(...Array(20).fill(taken));
    await expect(db.transaction((tx) => reserveHealthId(tx, 'CM', 'key-unlucky', generate))).rejects.toThrow(/No free Health ID/);
    expect(generate.calls).toBe(8);
    expect(await findByMatchKey(db, 'key-unlucky')).toBeUndefined();
  });
});
