import pg from 'pg';

/** PostgreSQL server used by the postgres project; each test file gets a database of its own. */
export const postgresAdminUrl = process.env.PONT_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** `fn` with a connection to the server's maintenance database, closed after. */
export async function withAdmin<T>(fn: (admin: pg.Client) => Promise<T>): Promise<T> {
  const admin = new pg.Client({ connectionString: postgresAdminUrl });
  await admin.connect();
  try {
    return await fn(admin);
  } finally {
    await admin.end();
  }
}
