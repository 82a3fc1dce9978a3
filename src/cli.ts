import { loadConfig } from './config';
import { openDatabase, openDatabaseForCommand } from './db/open';
import { migrate } from './db/migrate';
import type { Database } from './db/database';

/** One operator command: `pont <name> [args]`. Returns the process exit code. */
export interface Command {
  summary: string;
  usage: string;
  run(args: string[]): Promise<number>;
}

/**
 * Opens the configured database with migrations applied, runs `fn`, closes it. With the embedded
 * database held by a running service, it works through that service (which has migrated it).
 */
export async function withDatabase<T>(fn: (db: Database) => Promise<T>): Promise<T> {
  const { db, shared } = await openDatabaseForCommand(loadConfig());
  try {
    if (!shared) await migrate(db);
    return await fn(db);
  } finally {
    await db.close();
  }
}

const commands: Record<string, Command> = {
  serve: {
    summary: 'Run the HTTP service (what `npm start` does); --workers N: N processes on one port (PostgreSQL only)',
    usage: 'pont serve [--workers N]',
    async run(args) {
      const { serve } = await import('./main');
      await serve(args);
      return new Promise<number>(() => {}); // runs until a signal stops the process
    },
  },
  migrate: {
    summary: 'Apply database migrations and exit',
    usage: 'pont migrate',
    async run() {
      const db = await openDatabase(loadConfig());
      try {
        const applied = await migrate(db);
        console.log(applied.length ? `Applied: ${applied.join(', ')}` : 'Database is up to date');
        return 0;
      } finally {
        await db.close();
      }
    },
  },
  clients: {
    summary:
      'create --name N --org ORG [--facility F] --scopes "s1 s2" (prints the secret once); list; revoke ID; ' +
      'rotate-secret ID [--overlap 24h] (prints the new secret once; the old one stays valid for the overlap: 0, 90s, 15m, 1h, 7d)',
    usage: 'pont clients ACTION ...',
    run: async (args) => (await import('./auth/cli')).accessCommand('clients', args),
  },
  keys: {
    summary:
      'rotate (new signing key; the old one signs no more, its tokens stay valid until they expire); ' +
      'revoke KID (withdraw a key at once: its tokens are refused, it leaves the JWKS; revoking the signing key rotates first); list',
    usage: 'pont keys rotate | revoke KID | list',
    run: async (args) => (await import('./auth/cli')).accessCommand('keys', args),
  },
  agents: {
    summary: 'create --facility F (prints the agent key once); list; revoke ID',
    usage: 'pont agents ACTION ...',
    run: async (args) => (await import('./auth/cli')).accessCommand('agents', args),
  },
  import: {
    summary: 'Load FHIR transaction Bundles (.json, directories, .tar.gz) and bulk .ndjson',
    usage: 'pont import PATH...',
    async run(args) {
      const { importCommand } = await import('./fhir/import');
      return importCommand(args);
    },
  },
  mappings: {
    summary: 'check [DIR]: compile every map and run its examples both ways (default: PONT_MAPPINGS_DIR or mappings/)',
    usage: 'pont mappings check [DIR]',
    run: async (args) => (await import('./mapping/cli')).mappingsCommand(args),
  },
  webhooks: {
    summary: 'full-payload SUBSCRIPTION_ID on|off; attempts EVENT_ID (its deliveries, as JSON)',
    usage: 'pont webhooks ACTION ...',
    async run(args) {
      const { webhooksCommand } = await import('./webhooks/cli');
      return webhooksCommand(args);
    },
  },
};

function help(): string {
  const width = Math.max(...Object.values(commands).map((c) => c.usage.length));
  return ['Usage: pont <command> [options]', '', ...Object.values(commands).map((c) => `  ${c.usage.padEnd(width)}  ${c.summary}`)].join('\n');
}

export async function runCli(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (!name || name === 'help' || name === '--help' || name === '-h') {
    console.log(help());
    return name ? 0 : 1;
  }
  const command = commands[name];
  if (!command) {
    console.error(`Unknown command: ${name}\n\n${help()}`);
    return 1;
  }
  try {
    return await command.run(args);
  } catch (err) {
    console.error(err instanceof Error ? err.message : String(err));
    return 1;
  }
}
