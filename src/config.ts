import { z } from 'zod';

const environments = ['development', 'sandbox', 'production'] as const;
export type Environment = (typeof environments)[number];

const schema = z.object({
  PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  HOST: z.string().default('127.0.0.1'),
  /** The address integrators use; issuer of tokens and base of every absolute URL we publish. */
  PONT_PUBLIC_URL: z.url().optional(),
  PONT_ENV: z.enum(environments).default('development'),
  /** postgres://… for a PostgreSQL server; unset for the embedded database. */
  DATABASE_URL: z.string().regex(/^postgres(ql)?:\/\//, 'must be a postgres:// URL').optional(),
  PONT_DATA_DIR: z.string().default('./data'),
  /** Largest request body accepted, in bytes. */
  PONT_MAX_BODY_BYTES: z.coerce.number().int().positive().default(16 * 1024 * 1024),
  LOG_LEVEL: z.enum(['silent', 'error', 'info', 'debug']).default('info'),
});

export interface Config {
  port: number;
  host: string;
  publicUrl: string;
  environment: Environment;
  databaseUrl?: string;
  /** Absent: PGlite in memory (tests only). */
  dataDir?: string;
  maxBodyBytes: number;
  logLevel: 'silent' | 'error' | 'info' | 'debug';
}

/** Reads and validates the environment once; a bad value stops the start with a clear message. */
export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  const parsed = schema.safeParse(env);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `  ${i.path.join('.')}: ${i.message}`);
    throw new Error(`Invalid configuration:\n${lines.join('\n')}`);
  }
  const e = parsed.data;
  return {
    port: e.PORT,
    host: e.HOST,
    publicUrl: (e.PONT_PUBLIC_URL ?? `http://${e.HOST === '0.0.0.0' ? 'localhost' : e.HOST}:${e.PORT}`).replace(/\/$/, ''),
    environment: e.PONT_ENV,
    databaseUrl: e.DATABASE_URL,
    dataDir: e.DATABASE_URL ? undefined : e.PONT_DATA_DIR,
    maxBodyBytes: e.PONT_MAX_BODY_BYTES,
    logLevel: e.LOG_LEVEL,
  };
}
