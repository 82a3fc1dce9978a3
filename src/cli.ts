import { loadConfig, mappingsDirectory } from './config';
import { openMigratedDatabase } from './db/open';
import { withDatabase } from './db/command';
import { commandHelp, EXIT_CODES, groupHelp, invokedAs, parseAndCheckCommand, suggest, UsageError, wantsHelp, type CommandSpec, type OptionSpec } from './cli-args';

export { withDatabase } from './db/command';

const access = () => import('./auth/cli');
const str = (v: unknown) => v as string;

const OVERLAP: OptionSpec = {
  type: 'string',
  value: 'DURATION',
  default: '24h',
  description: 'How long the old secret stays valid beside the new one: 0 (not at all), 90s, 15m, 1h, 7d (at most 30d)',
};

const MONTH: OptionSpec = { type: 'string', value: 'YYYY-MM', required: true, description: 'The month (UTC), e.g. 2025-01' };

/** Groups of subcommands (`pont clients create`): what `pont --help` says of each. */
const GROUPS: Record<string, string> = {
  clients: 'Integration clients (OAuth client credentials): create, list, revoke, rotate a secret',
  keys: 'Token signing keys: rotate, revoke, list',
  agents: 'Bridge agents (one per facility): create, list, revoke',
  webhooks: 'Webhook operator switches and views',
  mappings: 'Mapping files (*.map.yaml)',
  'portal-users': 'People of an organisation who sign in to the developer portal (/portal)',
  audit: 'The audit trail archive: archive a month, restore one for an investigation',
  retention: 'Retention (PONT_RETENTION_*): run a pass now',
  terminology: 'Code systems, value sets and concept maps (docs/fhir.md "Terminology"): load them',
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
      const { db, applied } = await openMigratedDatabase(loadConfig());
      try {
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
      const [{ importCommand }, { createFhirService }, { loadMappings }] = await Promise.all([import('./fhir/import'), import('./services'), import('./mapping/index')]);
      const concurrency = values.concurrency === undefined ? [] : ['--concurrency', String(values.concurrency)];
      return importCommand([...(args.PATH as string[]), ...concurrency], (run) => {
        const config = loadConfig();
        return withDatabase((db) => run(createFhirService(db, config, loadMappings(mappingsDirectory(config))), db));
      });
    },
  },
  {
    name: 'clients create',
    summary: 'Create an integration client and print it as JSON, with its secret (shown this once)',
    details:
      'The secret is stored only as an Argon2id hash. An --all-patients client reads every patient without consent. ' +
      'With --jwks or --jwks-uri the client has no secret: it authenticates with assertions signed by its keys (SMART Backend Services).',
    options: {
      name: { type: 'string', value: 'TEXT', required: true, description: "The client's display name (1-200 characters)" },
      org: { type: 'string', value: 'ORG', required: true, description: 'The organisation it acts for: 1-64 letters, digits, . _ : -' },
      scopes: { type: 'string', value: 'SCOPES', required: true, description: 'Space- or comma-separated scopes (docs/integrators.md "Scopes"), e.g. "patients:read labs:read"' },
      facility: { type: 'string', value: 'FACILITY', description: 'A facility of the organisation: 1-64 letters, digits, . _ : -' },
      'all-patients': {
        type: 'boolean',
        default: 'false',
        description: "An operator client of the deploying institution: reads every patient's data without consent",
      },
      jwks: { type: 'string', value: 'FILE', description: 'A JSON file of the public JWK Set (RS384/ES384 keys, each with a kid; no private key) the client signs its assertions with' },
      'jwks-uri': { type: 'string', value: 'URL', description: 'Or the https:// URL of that JWK Set (fetched and cached 5 minutes; http:// loopback in development only)' },
    },
    examples: [
      'pont clients create --name "Clinique A" --org org-clinique-a --scopes "patients:read labs:read"',
      'pont clients create --name "Our EHR" --org org-institution --scopes "fhir:read fhir:write" --all-patients',
      'pont clients create --name "Bulk app" --org org-clinique-a --scopes "fhir:read" --jwks-uri https://app.example.org/jwks.json',
    ],
    check: async ({ values }) =>
      (await access()).checkClientFlags({
        name: values.name as string | undefined,
        org: values.org as string | undefined,
        facility: values.facility as string | undefined,
        scopes: values.scopes as string | undefined,
        jwks: values.jwks as string | undefined,
        jwksUri: values['jwks-uri'] as string | undefined,
      }),
    run: async ({ values }) =>
      (await access()).createClientCommand({
        name: str(values.name),
        org: str(values.org),
        facility: values.facility as string | undefined,
        scopes: str(values.scopes),
        allPatients: values['all-patients'] === true,
        jwks: values.jwks as string | undefined,
        jwksUri: values['jwks-uri'] as string | undefined,
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
    check: async ({ values }) => (await access()).checkOverlap(values.overlap as string | undefined),
    run: async ({ values, args, program }) => (await access()).rotateSecretCommand(str(args.ID), values.overlap as string | undefined, program),
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
    check: async ({ values }) => (await access()).checkAgentFlags({ org: values.org as string | undefined, facility: values.facility as string | undefined }),
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
    name: 'bridge-agent',
    summary: 'Run the HL7 v2 Bridge agent a facility installs: MLLP in, Pont\'s Bridge API out (docs/hl7-v2.md)',
    details: 'Runs until SIGINT/SIGTERM; SIGHUP reloads the maps (PONT_MAPPINGS_DIR, else mappings/). The config file (JSON, mode 600) holds pont_url, agent_id, agent_key, facility_id, mllp_host, mllp_port, queue_dir, max_message_bytes.',
    options: {
      config: { type: 'string', value: 'FILE', required: true, description: 'The agent\'s config file (JSON; readable by its owner only: it holds the agent key)' },
    },
    examples: ['pont bridge-agent --config /etc/pont/bridge-agent.json'],
    run: async ({ values }) => (await import('./agent/cli')).bridgeAgentCommand(str(values.config)),
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
    name: 'portal-users create',
    summary: 'Create a developer-portal user and print, as JSON, a one-time set-password link valid 24 h',
    options: {
      org: { type: 'string', value: 'ORG', required: true, description: 'The organisation: 1-64 letters, digits, . _ : -' },
      email: { type: 'string', value: 'EMAIL', required: true, description: 'The e-mail address they sign in with' },
      role: { type: 'string', value: 'ROLE', default: 'developer', description: 'admin (everything, invites users), developer (all but users) or viewer (read only)' },
    },
    examples: ['pont portal-users create --org org-1 --email ana@example.org --role admin'],
    check: async ({ values }) =>
      (await import('./portal/cli')).checkPortalUserFlags({ org: values.org as string | undefined, email: values.email as string | undefined, role: values.role as string | undefined }),
    run: async ({ values }) =>
      (await import('./portal/cli')).createPortalUserCommand({ org: str(values.org), email: str(values.email), role: values.role as string | undefined }),
  },
  {
    name: 'audit archive',
    summary: 'Archive a past month of the audit trail to AUDIT_ARCHIVE_DIR (gzip NDJSON of AuditEvents + manifest); drops nothing',
    details: 'Prints the manifest as JSON. An archive already made of the same rows is verified and kept; one of other rows is refused (exit code 1), never overwritten. The retention job (PONT_RETENTION_AUDIT) archives a month the same way before it drops it.',
    options: { month: MONTH },
    examples: ['pont audit archive --month 2025-01'],
    run: async ({ values }) => (await import('./retention/cli')).archiveCommand(str(values.month)),
  },
  {
    name: 'audit restore',
    summary: "Verify a month's archive and bring its AuditEvents back, searchable, for PONT_AUDIT_RESTORE_HOLD",
    details: 'Exit code 1, and nothing written, if a file is missing or does not match the sha256 of the manifest. Running it again finishes an interrupted restore.',
    options: { month: MONTH },
    examples: ['pont audit restore --month 2025-01'],
    run: async ({ values }) => (await import('./retention/cli')).restoreCommand(str(values.month)),
  },
  {
    name: 'retention run',
    summary: 'Run one retention pass now (what the service does hourly) and print what it did as JSON',
    details:
      'Partitions ahead, then every kind past its PONT_RETENTION_* period: months of the audit trail archived to AUDIT_ARCHIVE_DIR, verified and dropped; months of events and delivery attempts dropped; finished deliveries and replaced resource versions deleted. ' +
      'One pass at a time across processes (the job_claims row the service uses): exit code 1 if another is running, or if a step failed (the others still run; the JSON names the failures).',
    options: { 'dry-run': { type: 'boolean', default: 'false', description: 'Change nothing: print what the pass would do' } },
    examples: ['pont retention run --dry-run', 'PONT_RETENTION_AUDIT=1y AUDIT_ARCHIVE_DIR=/var/lib/pont/audit pont retention run'],
    async run({ values }) {
      const [{ retentionRunCommand }, { createFhirService }, { loadMappings }] = await Promise.all([import('./retention/cli'), import('./services'), import('./mapping/index')]);
      const config = loadConfig();
      return retentionRunCommand(values['dry-run'] === true, (db) => {
        const fhir = createFhirService(db, config, loadMappings(mappingsDirectory(config)));
        return (sql, type, ids) => fhir.purgeById(sql, type, ids);
      });
    },
  },
  {
    name: 'terminology load',
    summary: 'Load CodeSystem, ValueSet and ConceptMap resources and print what was loaded as JSON',
    details:
      'Each resource is loaded whole or not at all; loading a url and version again replaces it atomically, and every running process sees it at once. ' +
      'A hierarchy with a cycle, a parent that is not a code of its system or a code given twice is refused (exit code 1, each failure named on stderr).',
    args: [
      {
        name: 'FILE',
        variadic: true,
        description:
          'A .json file (a resource or a Bundle of them), an .ndjson file (one resource a line), a LOINC table (Loinc.csv), SNOMED CT RF2 snapshot files (sct2_Concept_…, sct2_Description_…, sct2_Relationship_…, der2_cRefset_Language…), or a directory of them',
      },
    ],
    options: { version: { type: 'string', value: 'VERSION', description: 'The version of a LOINC table (e.g. 2.77); RF2 takes its release date from its file names' } },
    examples: ['pont terminology load codesystems.ndjson valuesets.json', 'pont terminology load Loinc.csv --version 2.77', 'pont terminology load SnomedCT/Snapshot/Terminology'],
    run: async ({ args, values }) => (await import('./fhir/term/cli')).loadTerminologyCommand(args.FILE as string[], { version: values.version as string | undefined }),
  },
  {
    name: 'mappings check',
    summary: 'Compile every mapping file and run its examples both ways; exit code 1 if any problem',
    args: [{ name: 'DIR', required: false, description: 'The mappings directory (default: PONT_MAPPINGS_DIR, else mappings/)' }],
    examples: ['pont mappings check', 'pont mappings check ./my-mappings'],
    run: async ({ args }) => {
      const [{ mappingsCommand }, { searchProblem }, { fhirResourceProblem }, { verifyMappings }] = await Promise.all([import('./mapping/cli'), import('./fhir/search/parse'), import('./fhir/validate'), import('./server')]);
      // What the start checks of the maps, the store's and the routes' share included.
      return mappingsCommand(['check', ...(args.DIR ? [str(args.DIR)] : [])], { searchProblem, fhirProblem: fhirResourceProblem, verify: (dir) => verifyMappings(loadConfig(), dir) });
    },
  },
];

const byName = new Map(commands.map((c) => [c.name, c]));
const groupCommands = (group: string) => commands.filter((c) => c.name.startsWith(`${group} `));

function help(program: string): string {
  const rows = commands.map((c) => [c.name, c.summary] as const);
  const width = Math.max(...rows.map(([name]) => name.length));
  return [
    'Usage: pont <command> [options]',
    '',
    'Operator commands of Pont. Configuration comes from the environment (docs/operators.md "Configuration"): DATABASE_URL for',
    'PostgreSQL, else the embedded database in PONT_DATA_DIR (default ./data).',
    '',
    'Run it as node bin/pont.js <command> (in a checkout and in the image alike): what it prints is the command\'s alone.',
    'Through npm: npm run -s pont -- <command>. Without -s, npm run pont prints npm\'s banner on stdout before the',
    'command\'s output (a script reading JSON fails on it); npx pont and npm run may add npm\'s warnings on stderr.',
    '',
    'Commands:',
    ...rows.map(([name, summary]) => `  ${name.padEnd(width)}  ${summary}`),
    `  ${'help [COMMAND]'.padEnd(width)}  This help, or a command's (also: ${program} COMMAND --help)`,
    '',
    `Run '${program} <command> --help' for a command's options and examples.`,
    '',
    EXIT_CODES,
  ].join('\n');
}

type Resolved = { command: CommandSpec; rest: string[] } | { group: string; rest: string[] };

/** Finds the command (or the bare group) `argv` names; a name it does not know is a usage error with a suggestion. */
function resolve(argv: string[], program: string): Resolved {
  const [first = '', second, ...rest] = argv;
  if (GROUPS[first]) {
    if (second === undefined || second.startsWith('-')) return { group: first, rest: second === undefined ? [] : [second, ...rest] };
    const command = byName.get(`${first} ${second}`);
    if (!command) {
      const names = groupCommands(first).map((c) => c.name.slice(first.length + 1));
      throw new UsageError(
        `Unknown command: ${program} ${first} ${second}${suggest(second, names, (n) => `${program} ${first} ${n}`)}\nSubcommands of ${program} ${first}: ${names.join(', ')}`,
      );
    }
    return { command, rest };
  }
  const command = byName.get(first);
  if (command) return { command, rest: argv.slice(1) };
  const names = [...new Set(commands.map((c) => c.name.split(' ')[0]!)), 'help'];
  throw new UsageError(`Unknown command: ${first}${suggest(first, names, (n) => `${program} ${n}`)}`);
}

/**
 * `pont …`: returns the exit code (0 success, 1 the command failed, 2 usage error). `program`: the command as it was
 * run, named so in every command a message tells to run (invokedAs: `node bin/pont.js` in a checkout).
 */
export async function runCli(argv: string[], program = invokedAs()): Promise<number> {
  let hint = `Run '${program} --help' for usage.`;
  try {
    if (!argv.length) {
      console.error(help(program));
      return 2;
    }
    // `pont help`, `pont help --help`, `pont help help`: the help of the CLI itself.
    const words = argv[0] === 'help' ? argv.slice(1).filter((a) => a !== '--help' && a !== '-h') : argv;
    if (argv[0] === '--help' || argv[0] === '-h' || (argv[0] === 'help' && (!words.length || (words.length === 1 && words[0] === 'help')))) {
      console.log(help(program));
      return 0;
    }
    if (GROUPS[words[0]!]) hint = `Run '${program} ${words[0]} --help' for usage.`;
    const asked = resolve(words, program);
    if ('group' in asked) {
      const text = groupHelp(asked.group, GROUPS[asked.group]!, groupCommands(asked.group), program);
      if (argv[0] === 'help' || wantsHelp(asked.rest)) {
        console.log(text);
        return 0;
      }
      console.error(`${program} ${asked.group} needs a subcommand.\n\n${text}`);
      return 2;
    }
    const { command, rest } = asked;
    hint = `Run '${program} ${command.name} --help' for usage.`;
    if (argv[0] === 'help' || wantsHelp(rest)) {
      console.log(commandHelp(command));
      return 0;
    }
    return await command.run({ ...(await parseAndCheckCommand(command, rest)), program });
  } catch (err) {
    if (err instanceof UsageError) {
      console.error(`${err.message}\n${hint}`);
      return 2;
    }
    console.error(err instanceof Error ? err.message : String(err));
    return 1;
  }
}
