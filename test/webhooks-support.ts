/**
 * Support for the webhook tests and benchmark: a receiver written from the published contract
 * (section 6.3 and the README), not from Pont's code, which verifies every delivery's signature
 * the way an integrator would, over the raw body, and answers 400 to a bad one; and `pont serve`
 * child processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pontCommand } from './harness';

export interface Received {
  at: number;
  headers: IncomingMessage['headers'];
  rawBody: string;
  body: any;
  signatureValid: boolean;
}

/** What the receiver answers: a status, or 'hang' (never answer). */
export type Reply = number | 'hang';

/**
 * Stripe's scheme: t=<unix>,v1=<hex HMAC-SHA256("<t>.<raw body>")> keyed with the whole secret; 300 s tolerance.
 * Valid when any `v1` matches (during a secret rotation there is one per secret).
 */
export function verifySignature(rawBody: string, header: string | undefined, secret: string, toleranceSeconds = 300): boolean {
  if (!header) return false;
  const parts = header.split(',').map((kv) => kv.split('=', 2) as [string, string | undefined]);
  const t = Number(parts.find(([k]) => k === 't')?.[1]);
  if (!Number.isInteger(t) || Math.abs(Date.now() / 1000 - t) > toleranceSeconds) return false;
  const expected = createHmac('sha256', secret).update(`${t}.${rawBody}`).digest();
  return parts
    .filter(([k]) => k === 'v1')
    .map(([, v]) => Buffer.from(v ?? '', 'hex'))
    .some((given) => given.length === expected.length && timingSafeEqual(given, expected));
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Secret of the subscription this endpoint verifies against (set once it is known). */
  secret: string;
  reply: (r: Received) => Reply;
  /** Resolves once `n` deliveries (valid or not) have arrived. */
  waitFor(n: number): Promise<Received[]>;
  /** Answers every held ('hang') request with `status`. */
  release(status: number): void;
  /** TCP connections the receiver has accepted (a sender that keeps its connection alive opens one). */
  connections: number;
  close(): Promise<void>;
}

export async function startReceiver(reply: (r: Received) => Reply = () => 200): Promise<Receiver> {
  const waiters: Array<{ n: number; resolve: (r: Received[]) => void }> = [];
  const held: Array<(status: number) => void> = [];
  const receiver: Receiver = {
    url: '',
    received: [],
    secret: '',
    reply,
    connections: 0,
    waitFor(n) {
      if (receiver.received.length >= n) return Promise.resolve(receiver.received.slice(0, n));
      return new Promise((resolve) => waiters.push({ n, resolve }));
    },
    release(status) {
      for (const answer of held.splice(0)) answer(status);
    },
    async close() {
      receiver.release(503);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const rawBody = Buffer.concat(chunks).toString('utf8');
      const signatureValid = verifySignature(rawBody, req.headers['x-service-signature'] as string | undefined, receiver.secret);
      let body: unknown;
      try {
        body = JSON.parse(rawBody);
      } catch {
        body = undefined;
      }
      const got: Received = { at: Date.now(), headers: req.headers, rawBody, body, signatureValid };
      receiver.received.push(got);
      for (const w of waiters.filter((w) => receiver.received.length >= w.n)) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(receiver.received.slice(0, w.n));
      }
      const answer = (status: number) => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(status < 300 ? { received: true } : { error: 'refused' }));
      };
      const decided = signatureValid ? receiver.reply(got) : 400;
      if (decided === 'hang') held.push(answer);
      else answer(decided);
    });
  });
  server.on('connection', () => receiver.connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
  return receiver;
}

/**
 * How many of a subscription's deliveries are still pending (queued, in flight or awaiting a retry). Deliveries are
 * queued in the transaction that records the event, so once this is 0 nothing more reaches the subscriber until the
 * next change: the barrier for "and nothing else arrives", instead of waiting a while.
 */
export async function pendingDeliveries(db: { query<R>(sql: string, params?: unknown[]): Promise<{ rows: R[] }> }, subscriptionId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM webhook_deliveries WHERE subscription_id = $1 AND status = 'pending'`, [subscriptionId]);
  return rows[0]!.n;
}

export interface PontProcess {
  child: ChildProcess;
  exited: Promise<unknown>;
  /** Base URL it listens on. */
  url: string;
  /** What it has printed so far (its log: errors only, LOG_LEVEL=error), for a failing test to show. */
  output(): string;
}

/** `pont serve` (`pontCommand`) on a PostgreSQL database; resolves once it listens. */
export async function startPontProcess(databaseUrl: string, env: Record<string, string> = {}): Promise<PontProcess> {
  const child = spawn(process.execPath, pontCommand('serve'), {
    env: { ...process.env, DATABASE_URL: databaseUrl, PORT: '0', LOG_LEVEL: 'error', PONT_ENV: 'development', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  let output = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const listening = /Pont is listening on (http:\/\/\S+)/.exec(output);
      if (listening) resolve(listening[1]!);
    });
    child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
    void exited.then(() => reject(new Error(`pont serve exited before listening:\n${output}`)));
  });
  return { child, exited, url, output: () => output };
}

export async function stopPontProcess(p: PontProcess, signal: NodeJS.Signals): Promise<void> {
  if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill(signal);
  await p.exited;
}

/** Headers with a bearer token of `client` from the token endpoint at `url` (a server process's). */
export async function bearerFrom(url: string, client: { client_id: string; client_secret: string }): Promise<Record<string, string>> {
  const res = await fetch(`${url}/api/v1/connect/auth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ grant_type: 'client_credentials', client_id: client.client_id, client_secret: client.client_secret }),
  });
  const { access_token } = (await res.json()) as { access_token: string };
  return { authorization: `Bearer ${access_token}`, 'content-type': 'application/json' };
}
