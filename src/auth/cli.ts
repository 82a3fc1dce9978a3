import { z } from 'zod';
import { withDatabase } from '../cli';
import { UsageError } from '../cli-args';
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

const print = (value: unknown) => console.log(JSON.stringify(value, null, 2));

function notFound(what: string, id: string): never {
  throw new Error(`No ${what} ${id}`);
}

/** Validation messages name the flag the operator typed. */
const FLAGS: Record<string, string> = { name: '--name', organizationId: '--org', facilityId: '--facility', scopes: '--scopes' };

/** Runs one command of `pont clients|keys|agents` (src/cli.ts declares them) and prints its result as JSON. */
async function printed(work: () => Promise<unknown>): Promise<number> {
  try {
    print(await work());
    return 0;
  } catch (err) {
    if (err instanceof z.ZodError) {
      throw new UsageError(err.issues.map((i) => `${FLAGS[String(i.path[0])] ?? 'input'}: ${i.message}`).join('\n'));
    }
    throw err;
  }
}

const OVERLAP_UNITS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86_400 };

/** `--overlap`: `0`, or a whole number of s, m, h or d (`90s`, `15m`, `1h`, `7d`), at most 30 days; default 24 h. In seconds. */
export function parseOverlap(text: string | undefined): number {
  if (text === undefined) return DEFAULT_SECRET_OVERLAP_SECONDS;
  const match = /^(?:0|(\d+)([smhd]))$/.exec(text.trim());
  const seconds = match ? (match[1] ? Number(match[1]) * OVERLAP_UNITS[match[2]!]! : 0) : NaN;
  if (!(seconds <= MAX_SECRET_OVERLAP_SECONDS)) throw new UsageError(`--overlap: give 0 or a duration such as 90s, 15m, 1h, 7d (at most 30d), not "${text}"`);
  return seconds;
}

export const createClientCommand = (o: { name: string; org: string; facility?: string; scopes: string; allPatients: boolean }) =>
  printed(() => {
    const input = NewClientInput.parse({
      name: o.name,
      organizationId: o.org,
      facilityId: o.facility,
      scopes: o.scopes.split(/[\s,]+/).filter(Boolean),
      allPatients: o.allPatients,
    });
    return withDatabase((db) => createClient(db, input));
  });

export const listClientsCommand = () => printed(() => withDatabase(listClients));

export const revokeClientCommand = (id: string) => printed(() => withDatabase(async (db) => (await revokeClient(db, id)) ?? notFound('client', id)));

export const rotateSecretCommand = (id: string, overlapText: string | undefined) =>
  printed(() => {
    const overlap = parseOverlap(overlapText);
    return withDatabase(async (db) => {
      const rotated = (await rotateClientSecret(db, id, overlap)) ?? notFound('active client', id);
      await db.listenersCaughtUp(); // this process's own caches, as revokeClient does
      return rotated;
    });
  });

export const rotateKeyCommand = () => printed(() => withDatabase(rotateSigningKey));

export const listKeysCommand = () => printed(() => withDatabase(listSigningKeys));

export const revokeKeyCommand = (kid: string) => printed(() => withDatabase(async (db) => (await revokeSigningKey(db, kid)) ?? notFound('signing key', kid)));

export const createAgentCommand = (o: { org: string; facility: string }) =>
  printed(() => withDatabase((db) => createAgent(db, { facilityId: o.facility, organizationId: o.org })));

export const listAgentsCommand = () => printed(() => withDatabase(listAgents));

export const revokeAgentCommand = (id: string) => printed(() => withDatabase(async (db) => (await revokeAgent(db, id)) ?? notFound('agent', id)));
