import pg from 'pg';

/** PostgreSQL server used by the postgres project; each test file gets a database of its own. */
export const postgresAdminUrl = process.env.PONT_TEST_POSTGRES_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** `fn` with a connection of its own to the database at `url`, closed after. */
export async function withClient<T>(url: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

/** `fn` with a connection to the server's maintenance database, closed after. */
export const withAdmin = <T>(fn: (admin: pg.Client) => Promise<T>): Promise<T> => withClient(postgresAdminUrl, fn);
