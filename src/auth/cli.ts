import { readFileSync } from 'node:fs';
import { z } from 'zod';
import { withDatabase } from '../db/command';
import { loadConfig } from '../config';
import { flagProblems, issueProblems, UsageError } from '../cli-args';
import { createAgent, facilityTakenByAnother, listAgents, revokeAgent } from './agents';
import {
  createClient,
  createKeyClient,
  EntityId,
  keyClientInput,
  DEFAULT_SECRET_OVERLAP_SECONDS,
  findClient,
  listClients,
  MAX_SECRET_OVERLAP_SECONDS,
  NewClientInput,
  noSecretToRotate,
  revokeClient,
  rotateClientSecret,
  type ClientRecord,
} from './clients';
import { listSigningKeys, revokeSigningKey, rotateSigningKey } from './keys';

const print = (value: unknown) => console.log(JSON.stringify(value, null, 2));

function notFound(what: string, id: string): never {
  throw new Error(`No ${what} ${id}`);
}

/** Validation messages name the flag the operator typed. */
const FLAGS: Record<string, string> = { name: '--name', organizationId: '--org', facilityId: '--facility', scopes: '--scopes', jwks: '--jwks', jwksUri: '--jwks-uri' };

/** Runs one command of `pont clients|keys|agents` (src/cli.ts declares them) and prints its result as JSON. */
async function printed(work: () => Promise<unknown>): Promise<number> {
  try {
    print(await work());
    return 0;
  } catch (err) {
    if (err instanceof z.ZodError) throw new UsageError(issueProblems(err, FLAGS).join('\n'));
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

/** The JSON of `--jwks FILE`, or why it cannot be had. */
function jwksOfFile(file: string): { json: unknown } | { problem: string } {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    return { problem: `--jwks: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})` };
  }
  try {
    return { json: JSON.parse(text) };
  } catch {
    return { problem: `--jwks: ${file} is not JSON (give a JWK Set: {"keys": [...]})` };
  }
}

function readJwksFile(file: string): unknown {
  const read = jwksOfFile(file);
  if ('problem' in read) throw new UsageError(read.problem);
  return read.json;
}

type ClientFlags = { name?: string; org?: string; facility?: string; scopes?: string; jwks?: string; jwksUri?: string };

const scopeList = (text: string) => text.split(/[\s,]+/).filter(Boolean);

/**
 * `pont clients create`'s values, every one (src/cli.ts runs it beside the parser, before the command): a scope Pont
 * does not know, an id it cannot take, a key file it cannot read, a jwks_uri it would refuse.
 */
export async function checkClientFlags(o: ClientFlags): Promise<string[]> {
  const { shape } = NewClientInput;
  const problems = await flagProblems([
    { flag: '--name', value: o.name, schema: shape.name },
    { flag: '--org', value: o.org, schema: shape.organizationId },
    { flag: '--facility', value: o.facility, schema: EntityId },
    { flag: '--scopes', value: o.scopes === undefined ? undefined : scopeList(o.scopes), schema: shape.scopes, what: 'a scope Pont knows' },
  ]);
  const read = o.jwks === undefined ? undefined : jwksOfFile(o.jwks);
  if (read && 'problem' in read) problems.push(read.problem);
  const jwks = read && 'json' in read ? read.json : undefined;
  if (jwks !== undefined || o.jwksUri !== undefined) {
    const keys = keyClientInput(loadConfig().environment === 'development').shape;
    problems.push(
      ...(await flagProblems([
        { flag: '--jwks', value: jwks, schema: keys.jwks },
        { flag: '--jwks-uri', value: o.jwksUri, schema: keys.jwksUri },
      ])),
    );
  }
  if (o.jwks !== undefined && o.jwksUri !== undefined) problems.push('--jwks, --jwks-uri: give the public keys either inline (--jwks) or by URL (--jwks-uri), not both');
  return problems;
}

/** `pont agents create`'s values. */
export const checkAgentFlags = (o: { org?: string; facility?: string }) =>
  flagProblems([
    { flag: '--org', value: o.org, schema: EntityId },
    { flag: '--facility', value: o.facility, schema: EntityId },
  ]);

/** `pont clients rotate-secret`'s --overlap. */
export function checkOverlap(text: string | undefined): string[] {
  try {
    parseOverlap(text);
    return [];
  } catch (err) {
    if (err instanceof UsageError) return [err.message];
    throw err;
  }
}

export const createClientCommand = (o: { name: string; org: string; facility?: string; scopes: string; allPatients: boolean; jwks?: string; jwksUri?: string }) =>
  printed(async () => {
    const input = NewClientInput.parse({
      name: o.name,
      organizationId: o.org,
      facilityId: o.facility,
      scopes: scopeList(o.scopes),
      allPatients: o.allPatients,
    });
    if (o.jwks === undefined && o.jwksUri === undefined) return withDatabase((db) => createClient(db, input));
    // A client of signed assertions (SMART Backend Services): http:// jwks_uri to loopback in development only.
    const allowHttpLoopback = loadConfig().environment === 'development';
    const keys = await keyClientInput(allowHttpLoopback).parseAsync({ ...input, jwks: o.jwks === undefined ? undefined : readJwksFile(o.jwks), jwksUri: o.jwksUri });
    return withDatabase((db) => createKeyClient(db, keys));
  });

export const listClientsCommand = () => printed(() => withDatabase(listClients));

export const revokeClientCommand = (id: string) => printed(() => withDatabase(async (db) => (await revokeClient(db, id)) ?? notFound('client', id)));

/** `program`: the command as it was run (invokedAs), in the commands the answer tells to run. */
export const rotateSecretCommand = (id: string, overlapText: string | undefined, program = 'pont') =>
  printed(() => {
    const overlap = parseOverlap(overlapText);
    return withDatabase(async (db) => {
      const rotated = await rotateClientSecret(db, id, overlap);
      if (!rotated) throw new Error(whyNoSecret(id, await findClient(db, id), program));
      await db.listenersCaughtUp(); // this process's own caches, as revokeClient does
      return rotated;
    });
  });

/** Why a client has no secret to rotate, and what to do instead, as true of it as can be said. */
function whyNoSecret(id: string, client: ClientRecord | undefined, program: string): string {
  if (!client) return `No client ${id}`;
  if (client.revoked_at) return `Client ${id} was revoked at ${client.revoked_at}: it takes no new secret. Create another with ${program} clients create.`;
  const quoted = (text: string) => (/^[A-Za-z0-9._:@/-]+$/.test(text) ? text : `"${text.replace(/(["\\$`])/g, '\\$1')}"`);
  const create = [
    `${program} clients create --name`,
    quoted(client.name),
    '--org',
    client.organization_id,
    ...(client.facility_id ? ['--facility', client.facility_id] : []),
    '--scopes',
    `"${client.scopes.join(' ')}"`,
    ...(client.all_patients ? ['--all-patients'] : []),
    '--jwks FILE',
  ].join(' ');
  const registerAgain = `register it again with the new public keys in FILE: ${create}; give the new client id to its owner, then revoke this one: ${program} clients revoke ${id}`;
  return noSecretToRotate(client, registerAgain) ?? `Client ${id} changed while its secret was being rotated: try again`;
}

export const rotateKeyCommand = () => printed(() => withDatabase(rotateSigningKey));

export const listKeysCommand = () => printed(() => withDatabase(listSigningKeys));

export const revokeKeyCommand = (kid: string) => printed(() => withDatabase(async (db) => (await revokeSigningKey(db, kid)) ?? notFound('signing key', kid)));

/**
 * A facility is one organisation's (its agents' and clients'), as the portal keeps it: an agent of another there would
 * make the same Pont ids for the same facility ids, and learn from its answers which of the first one's exist.
 */
export const createAgentCommand = (o: { org: string; facility: string }) =>
  printed(() =>
    withDatabase((db) =>
      db.transaction(async (tx) => {
        if (await facilityTakenByAnother(tx, o.facility, o.org))
          throw new Error(`Facility ${o.facility} is bound to another organisation (its agents or clients); fix: give this agent a facility id of ${o.org}'s own`);
        return createAgent(tx, { facilityId: o.facility, organizationId: o.org });
      }),
    ),
  );

export const listAgentsCommand = () => printed(() => withDatabase(listAgents));

export const revokeAgentCommand = (id: string) => printed(() => withDatabase(async (db) => (await revokeAgent(db, id)) ?? notFound('agent', id)));
