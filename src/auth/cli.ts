import { parseArgs } from 'node:util';
import { z } from 'zod';
import { withDatabase } from '../cli';
import { createAgent, listAgents, revokeAgent } from './agents';
import {
  createClient,
  DEFAULT_SECRET_OVERLAP_SECONDS,
  listClients,
  MAX_SECRET_OVERLAP_SECONDS,
  NewClientInput,
  revokeClient,
  rotateClientSecret,
} from './clients';
import { listSigningKeys, revokeSigningKey, rotateSigningKey } from './keys';

type Subcommands = Record<string, (args: string[]) => Promise<unknown>>;

const print = (value: unknown) => console.log(JSON.stringify(value, null, 2));

/** One positional id, nothing else. */
function onlyId(args: string[], what: string): string {
  const { positionals } = parseArgs({ args, allowPositionals: true, options: {} });
  if (positionals.length !== 1) throw new Error(`Give exactly one ${what}`);
  return positionals[0]!;
}

function notFound(what: string, id: string): never {
  throw new Error(`No ${what} ${id}`);
}

const OVERLAP_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** `--overlap`: `0`, or a whole number of s, m, h or d (`90s`, `15m`, `1h`, `7d`), at most 30 days; default 24 h. In seconds. */
export function parseOverlap(text: string | undefined): number {
  if (text === undefined) return DEFAULT_SECRET_OVERLAP_SECONDS;
  const match = /^(?:0|(\d+)([smhd]))$/.exec(text.trim());
  const seconds = match ? (match[1] ? Number(match[1]) * OVERLAP_UNITS[match[2]!]! : 0) : NaN;
  if (!(seconds <= MAX_SECRET_OVERLAP_SECONDS)) throw new Error(`--overlap: give 0 or a duration such as 90s, 15m, 1h, 7d (at most 30d), not "${text}"`);
  return seconds;
}

const clients: Subcommands = {
  async create(args) {
    const { values } = parseArgs({
      args,
      options: {
        name: { type: 'string' },
        org: { type: 'string' },
        facility: { type: 'string' },
        scopes: { type: 'string' },
        'all-patients': { type: 'boolean', default: false },
      },
    });
    const input = NewClientInput.parse({
      name: values.name ?? '',
      organizationId: values.org ?? '',
      facilityId: values.facility,
      scopes: (values.scopes ?? '').split(/[\s,]+/).filter(Boolean),
      allPatients: values['all-patients'],
    });
    return withDatabase((db) => createClient(db, input));
  },
  list: () => withDatabase(listClients),
  revoke: (args) => {
    const id = onlyId(args, 'client id');
    return withDatabase(async (db) => (await revokeClient(db, id)) ?? notFound('client', id));
  },
  'rotate-secret': (args) => {
    const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { overlap: { type: 'string' } } });
    if (positionals.length !== 1) throw new Error('Give exactly one client id');
    const id = positionals[0]!;
    const overlap = parseOverlap(values.overlap);
    return withDatabase(async (db) => {
      const rotated = (await rotateClientSecret(db, id, overlap)) ?? notFound('active client', id);
      await db.listenersCaughtUp(); // this process's own caches, as revokeClient does
      return rotated;
    });
  },
};

const keys: Subcommands = {
  rotate: () => withDatabase(rotateSigningKey),
  list: () => withDatabase(listSigningKeys),
  revoke: (args) => {
    const kid = onlyId(args, 'key id (kid)');
    return withDatabase(async (db) => (await revokeSigningKey(db, kid)) ?? notFound('signing key', kid));
  },
};

const agents: Subcommands = {
  async create(args) {
    const { values } = parseArgs({ args, options: { facility: { type: 'string' }, org: { type: 'string' } } });
    return withDatabase((db) => createAgent(db, { facilityId: values.facility ?? '', organizationId: values.org ?? '' }));
  },
  list: () => withDatabase(listAgents),
  revoke: (args) => {
    const id = onlyId(args, 'agent id');
    return withDatabase(async (db) => (await revokeAgent(db, id)) ?? notFound('agent', id));
  },
};

const groups: Record<string, Subcommands> = { clients, keys, agents };

/** Validation messages name the flag the operator typed. */
const FLAGS: Record<string, string> = { name: '--name', organizationId: '--org', facilityId: '--facility', scopes: '--scopes' };

/** `pont clients|keys|agents <subcommand> ...`: prints the result as JSON. */
export async function accessCommand(group: string, args: string[]): Promise<number> {
  const [name, ...rest] = args;
  const run = name ? groups[group]?.[name] : undefined;
  if (!run) throw new Error(`Unknown command: pont ${group} ${name ?? ''}\nSubcommands: ${Object.keys(groups[group] ?? {}).join(', ')}`);
  try {
    print(await run(rest));
    return 0;
  } catch (err) {
    if (err instanceof z.ZodError) {
      throw new Error(err.issues.map((i) => `${FLAGS[String(i.path[0])] ?? 'input'}: ${i.message}`).join('\n'));
    }
    throw err;
  }
}
