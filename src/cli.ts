import { loadConfig } from './config';
import { openDatabase, openDatabaseForCommand } from './db/open';
import { migrate } from './db/migrate';
import type { Database } from './db/database';
import { commandHelp, EXIT_CODES, groupHelp, parseCommand, suggest, UsageError, wantsHelp, type CommandSpec, type OptionSpec } from './cli-args';

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

const access = () => import('./auth/cli');
const str = (v: unknown) => v as string;

const OVERLAP: OptionSpec = {
  type: 'string',
  value: 'DURATION',
  default: '24h',
  description: 'How long the old secret stays valid beside the new one: 0 (not at all), 90s, 15m, 1h, 7d (at most 30d)',
};

/** Groups of subcommands (`pont clients create`): what `pont --help` says of each. */
const GROUPS: Record<string, string> = {
  clients: 'Integration clients (OAuth client credentials): create, list, revoke, rotate a secret',
  keys: 'Token signing keys: rotate, revoke, list',
  agents: 'Bridge agents (one per facility): create, list, revoke',
  webhooks: 'Webhook operator switches and views',
  mappings: 'Mapping files (*.map.yaml)',
};

/**
 * Every operator command, once: the parser, `pont --help` and each command's `--help` are made from this table
 * (src/cli-args.ts). Output formats are part of the interface: scripts read them.
 */
export const commands: CommandSpec[] = [
  {
    name: 'serve',
    summary: 'Run the HTTP service until SIGINT/SIGTERM (what `npm start` does)',
    details: 'With --workers N (PostgreSQL only), N processes share the port, each a whole Pont on the one database.',
    options: {
      workers: { type: 'integer', value: 'N', min: 1, max: 64, default: 'PONT_WORKERS, else 1', description: 'Number of server processes (more than 1 needs DATABASE_URL)' },
    },
    examples: ['pont serve', 'DATABASE_URL=postgres://pont@127.0.0.1:5432/pont pont serve --workers 2'],
    async run({ values }) {
      const { serve } = await import('./main');
      await serve(values.workers === undefined ? [] : ['--workers', String(values.workers)]);
      return new Promise<number>(() => {}); // runs until a signal stops the process
    },
  },
  {
    name: 'migrate',
    summary: 'Apply database migrations and exit (every start does it too)',
    examples: ['pont migrate'],
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
  {
    name: 'import',
    summary: 'Load FHIR transaction Bundles (.json), bulk .ndjson files, .tar.gz archives and directories of them',
    details: 'Prints a summary; exit code 1 if any file or resource failed (each is named).',
    args: [{ name: 'PATH', variadic: true, description: 'A .json, .ndjson or .tar.gz file, or a directory' }],
    options: {
      concurrency: { type: 'integer', value: 'N', min: 1, max: 16, default: '2 on PostgreSQL, 1 embedded', description: 'Files loaded at once' },
    },
    examples: ['pont import samples/synthea', 'pont import bundle.json more/*.ndjson --concurrency 4'],
    async run({ values, args }) {
      const { importCommand } = await import('./fhir/import');
      const concurrency = values.concurrency === undefined ? [] : ['--concurrency', String(values.concurrency)];
      return importCommand([...(args.PATH as string[]), ...concurrency]);
    },
  },
  {
    name: 'clients create',
    summary: 'Create an integration client and print it as JSON, with its secret (shown this once)',
    details: 'The secret is stored only as an Argon2id hash. An --all-patients client reads every patient without consent.',
    options: {
      name: { type: 'string', value: 'TEXT', required: true, description: "The client's display name (1-200 characters)" },
      org: { type: 'string', value: 'ORG', required: true, description: 'The organisation it acts for: 1-64 letters, digits, . _ : -' },
      scopes: { type: 'string', value: 'SCOPES', required: true, description: 'Space- or comma-separated scopes (README "Scopes"), e.g. "patients:read labs:read"' },
      facility: { type: 'string', value: 'FACILITY', description: 'A facility of the organisation: 1-64 letters, digits, . _ : -' },
      'all-patients': {
        type: 'boolean',
        default: 'false',
        description: "An operator client of the deploying institution: reads every patient's data without consent",
      },
    },
    examples: [
      'pont clients create --name "Clinique A" --org org-clinique-a --scopes "patients:read labs:read"',
      'pont clients create --name "Our EHR" --org org-institution --scopes "fhir:read fhir:write" --all-patients',
    ],
    run: async ({ values }) =>
      (await access()).createClientCommand({
        name: str(values.name),
        org: str(values.org),
        facility: values.facility as string | undefined,
        scopes: str(values.scopes),
        allPatients: values['all-patients'] === true,
      }),
  },
  {
    name: 'clients list',
    summary: 'List every client (never a secret) as JSON',
    examples: ['pont clients list'],
    run: async () => (await access()).listClientsCommand(),
  },
  {
    name: 'clients revoke',
    summary: "Revoke a client at once, in every process: its secret and tokens stop working",
    args: [{ name: 'ID', description: 'The client id (cli_…)' }],
    examples: ['pont clients revoke cli_0123456789abcdef01234567'],
    run: async ({ args }) => (await access()).revokeClientCommand(str(args.ID)),
  },
  {
    name: 'clients rotate-secret',
    summary: "Give a client a new secret (printed once as JSON); the old one stays valid for the overlap",
    args: [{ name: 'ID', description: 'The client id (cli_…)' }],
    options: { overlap: OVERLAP },
    examples: ['pont clients rotate-secret cli_0123456789abcdef01234567', 'pont clients rotate-secret cli_0123456789abcdef01234567 --overlap 0'],
    run: async ({ values, args }) => (await access()).rotateSecretCommand(str(args.ID), values.overlap as string | undefined),
  },
  {
    name: 'keys rotate',
    summary: 'Make a new signing key; the old one signs no more, its tokens stay valid until they expire',
    examples: ['pont keys rotate'],
    run: async () => (await access()).rotateKeyCommand(),
  },
  {
    name: 'keys revoke',
    summary: 'Withdraw a key at once: its tokens are refused and it leaves the JWKS (revoking the signing key rotates first)',
    args: [{ name: 'KID', description: 'The key id (kid: its JWK thumbprint, as `pont keys list` shows it)' }],
    examples: ['pont keys revoke NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs'],
    run: async ({ args }) => (await access()).revokeKeyCommand(str(args.KID)),
  },
  {
    name: 'keys list',
    summary: 'List the signing keys, their status and how long each stays published, as JSON',
    examples: ['pont keys list'],
    run: async () => (await access()).listKeysCommand(),
  },
  {
    name: 'agents create',
    summary: 'Create a Bridge agent of a facility and print it as JSON, with its key (shown this once)',
    options: {
      org: { type: 'string', value: 'ORG', required: true, description: "The facility's organisation: 1-64 letters, digits, . _ : -" },
      facility: { type: 'string', value: 'FACILITY', required: true, description: 'The facility the agent runs at: 1-64 letters, digits, . _ : -' },
    },
    examples: ['pont agents create --org org-1 --facility fac-1'],
    run: async ({ values }) => (await access()).createAgentCommand({ org: str(values.org), facility: str(values.facility) }),
  },
  {
    name: 'agents list',
    summary: 'List the Bridge agents (never a key) as JSON',
    examples: ['pont agents list'],
    run: async () => (await access()).listAgentsCommand(),
  },
  {
    name: 'agents revoke',
    summary: 'Revoke a Bridge agent: its key stops working at once',
    args: [{ name: 'ID', description: 'The agent id (agt_…)' }],
    examples: ['pont agents revoke agt_0123456789abcdef01234567'],
    run: async ({ args }) => (await access()).revokeAgentCommand(str(args.ID)),
  },
  {
    name: 'webhooks full-payload',
    summary: "Turn full event payloads on or off for one subscription (default: metadata only)",
    args: [
      { name: 'SUBSCRIPTION_ID', description: 'The subscription id (whsub_…)' },
      { name: 'SWITCH', choices: ['on', 'off'], description: 'on: deliveries carry the full `data`; off: identifiers only' },
    ],
    examples: ['pont webhooks full-payload whsub_0123456789abcdef01234567 on'],
    run: async ({ args }) => (await import('./webhooks/cli')).webhooksCommand(['full-payload', str(args.SUBSCRIPTION_ID), str(args.SWITCH)]),
  },
  {
    name: 'webhooks attempts',
    summary: "Show an event's deliveries and every attempt, as JSON",
    args: [{ name: 'EVENT_ID', description: 'The event (evt_…)' }],
    examples: ['pont webhooks attempts evt_0123456789abcdef0123456789abcdef'],
    run: async ({ args }) => (await import('./webhooks/cli')).webhooksCommand(['attempts', str(args.EVENT_ID)]),
  },
  {
    name: 'mappings check',
    summary: 'Compile every mapping file and run its examples both ways; exit code 1 if any problem',
    args: [{ name: 'DIR', required: false, description: 'The mappings directory (default: PONT_MAPPINGS_DIR, else mappings/)' }],
    examples: ['pont mappings check', 'pont mappings check ./my-mappings'],
    run: async ({ args }) => (await import('./mapping/cli')).mappingsCommand(['check', ...(args.DIR ? [str(args.DIR)] : [])]),
  },
];

const byName = new Map(commands.map((c) => [c.name, c]));
const groupCommands = (group: string) => commands.filter((c) => c.name.startsWith(`${group} `));

function help(): string {
  const rows = commands.map((c) => [c.name, c.summary] as const);
  const width = Math.max(...rows.map(([name]) => name.length));
  return [
    'Usage: pont <command> [options]',
    '',
    'Operator commands of Pont. Configuration comes from the environment (README "Running it"): DATABASE_URL for',
    'PostgreSQL, else the embedded database in PONT_DATA_DIR (default ./data).',
    '',
    'Commands:',
    ...rows.map(([name, summary]) => `  ${name.padEnd(width)}  ${summary}`),
    `  ${'help [COMMAND]'.padEnd(width)}  This help, or a command's (also: pont COMMAND --help)`,
    '',
    "Run 'pont <command> --help' for a command's options and examples.",
    '',
    EXIT_CODES,
  ].join('\n');
}

type Resolved = { command: CommandSpec; rest: string[] } | { group: string; rest: string[] };

/** Finds the command (or the bare group) `argv` names; a name it does not know is a usage error with a suggestion. */
function resolve(argv: string[]): Resolved {
  const [first = '', second, ...rest] = argv;
  if (GROUPS[first]) {
    if (second === undefined || second.startsWith('-')) return { group: first, rest: second === undefined ? [] : [second, ...rest] };
    const command = byName.get(`${first} ${second}`);
    if (!command) {
      const names = groupCommands(first).map((c) => c.name.slice(first.length + 1));
      throw new UsageError(
        `Unknown command: pont ${first} ${second}${suggest(second, names, (n) => `pont ${first} ${n}`)}\nSubcommands of pont ${first}: ${names.join(', ')}`,
      );
    }
    return { command, rest };
  }
  const command = byName.get(first);
  if (command) return { command, rest: argv.slice(1) };
  const names = [...new Set(commands.map((c) => c.name.split(' ')[0]!)), 'help'];
  throw new UsageError(`Unknown command: ${first}${suggest(first, names, (n) => `pont ${n}`)}`);
}

/** `pont …`: returns the exit code (0 success, 1 the command failed, 2 usage error). */
export async function runCli(argv: string[]): Promise<number> {
  let hint = "Run 'pont --help' for usage.";
  try {
    if (!argv.length) {
      console.error(help());
      return 2;
    }
    if (argv[0] === '--help' || argv[0] === '-h' || (argv[0] === 'help' && argv.length === 1)) {
      console.log(help());
      return 0;
    }
    const words = argv[0] === 'help' ? argv.slice(1) : argv;
    if (GROUPS[words[0]!]) hint = `Run 'pont ${words[0]} --help' for usage.`;
    const asked = resolve(words);
    if ('group' in asked) {
      const text = groupHelp(asked.group, GROUPS[asked.group]!, groupCommands(asked.group));
      if (argv[0] === 'help' || wantsHelp(asked.rest)) {
        console.log(text);
        return 0;
      }
      console.error(`pont ${asked.group} needs a subcommand.\n\n${text}`);
      return 2;
    }
    const { command, rest } = asked;
    hint = `Run 'pont ${command.name} --help' for usage.`;
    if (argv[0] === 'help' || wantsHelp(rest)) {
      console.log(commandHelp(command));
      return 0;
    }
    return await command.run(parseCommand(command, rest));
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`${err.message}\n${hint}`);
      return 2;
    }
    console.error(err instanceof Error ? err.message : String(err));
    return 1;
  }
}
