import type { IncomingMessage, Server } from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Database } from '../db/database';
import type { Logger } from '../log';
import { SUBSCRIPTION_CHANNEL, type FhirSubscriptions } from './service';

/** Where websocket clients connect (the `websocket-url` of $get-ws-binding-token). */
export const WS_PATH = '/api/fhir/R4/$subscription-ws';
/**
 * A bound socket catches up this often, should a NOTIFY be lost, and gets a WebSocket ping frame (a keep-alive for the
 * proxies between, answered by the client's WebSocket stack, not its code). Heartbeat notifications are the
 * subscription's: at its backport-heartbeat-period, none without one (the IG).
 */
const CATCH_UP_MS = 30_000;
const MAX_MESSAGE_BYTES = 4096;
const MAX_BINDINGS_PER_SOCKET = 20;

interface Binding {
  socket: WebSocket;
  id: string;
  organizationId: string;
  /** The last event number this socket was sent. */
  last: number;
  /** Sends run one after another per binding: numbers go out in order, each once. */
  queue: Promise<void>;
  /** A catch-up is queued and not yet started: wake-ups meanwhile are served by it (no backlog of empty reads). */
  waiting: boolean;
  /** Its heartbeats (backport-heartbeat-period), when it has a period. */
  heartbeat?: NodeJS.Timeout;
}

/**
 * The websocket channel of FHIR Subscriptions (Backport IG): a client sends `bind-with-token: <token>` (from
 * $get-ws-binding-token), gets a handshake per subscription the token binds, then each event-notification Bundle as its
 * subscription numbers it, and heartbeats; `ping` is answered `pong`. Whichever process holds the socket serves it; it is
 * woken by PostgreSQL NOTIFY on SUBSCRIPTION_CHANNEL from whichever process committed the change (PGlite: in process),
 * and catches up from the stored events, so nothing depends on one process's memory.
 */
export function subscriptionSockets(server: Server, subs: FhirSubscriptions, db: Database, log: Logger): { close(): Promise<void> } {
  const wss = new WebSocketServer({ noServer: true, maxPayload: MAX_MESSAGE_BYTES });
  const bindings = new Map<string, Set<Binding>>();
  let closing = false;

  const pump = (b: Binding) => {
    if (b.waiting) return;
    b.waiting = true;
    b.queue = b.queue
      .then(async () => {
        b.waiting = false;
        if (b.socket.readyState !== b.socket.OPEN) return;
        const next = await subs.eventsAfter(b.organizationId, b.id, b.last);
        if (!next) return void b.socket.close(4404, 'subscription gone');
        for (const bundle of next.bundles) b.socket.send(bundle);
        b.last = next.last;
      })
      .catch((err) => {
        if (!closing) log.error('websocket notification failed', { subscription_id: b.id, error: String(err) });
      });
  };

  const onUpgrade = (req: IncomingMessage, socket: Duplex, head: Buffer) => {
    if (new URL(req.url ?? '/', 'http://x').pathname !== WS_PATH) return; // not ours: other upgrade handlers, or none
    wss.handleUpgrade(req, socket, head, (ws) => serve(ws));
  };
  server.on('upgrade', onUpgrade);

  const serve = (ws: WebSocket) => {
    const mine: Binding[] = [];
    const timer = setInterval(() => {
      if (ws.readyState === ws.OPEN) ws.ping();
      for (const b of mine) pump(b);
    }, CATCH_UP_MS);
    timer.unref();
    ws.on('message', async (data, isBinary) => {
      const text = isBinary ? '' : data.toString('utf8').trim();
      if (text === 'ping') return void ws.send('pong');
      // The IG's websocket diagram writes it both ways: `bind-with-token <token>` and `bind-with-token: <token>`.
      const token = /^bind-with-token(?::\s*|\s+)(\S+)$/.exec(text)?.[1];
      if (!token) return void ws.send(JSON.stringify({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'invalid', diagnostics: 'Send "bind-with-token: <token>" (from $get-ws-binding-token) or "ping"' }] }));
      const bound = await subs.redeem(token).catch(() => undefined);
      if (!bound || mine.length + bound.filter((x) => !mine.some((m) => m.id === x.id)).length > MAX_BINDINGS_PER_SOCKET) {
        ws.send(JSON.stringify({ resourceType: 'OperationOutcome', issue: [{ severity: 'error', code: 'security', diagnostics: 'The token is unknown, used or expired' }] }));
        return void ws.close(4401, 'bad token');
      }
      // This process LISTENs before the handshake reads the count: every number given after that read wakes the socket
      // (a socket bound before the LISTEN was in place heard nothing of what was committed in between until its heartbeat).
      await listening;
      for (const { id, organizationId } of bound) {
        const handshake = await subs.wsHandshake(organizationId, id);
        if (!handshake || ws.readyState !== ws.OPEN) continue;
        ws.send(handshake.body);
        // Bound already on this socket (a fresh token before the last one expires, as the IG's flow does): the binding
        // goes on as it was; a second one would send every event twice.
        if (mine.some((m) => m.id === id)) continue;
        // From the handshake on: what the subscription numbers after it is sent (missed events: $events).
        const b: Binding = { socket: ws, id, organizationId, last: handshake.last, queue: Promise.resolve(), waiting: false };
        if (handshake.heartbeatSeconds) {
          b.heartbeat = setInterval(async () => {
            const beat = await subs.wsHeartbeat(organizationId, id).catch(() => undefined);
            if (beat && ws.readyState === ws.OPEN) ws.send(beat);
          }, handshake.heartbeatSeconds * 1000);
          b.heartbeat.unref();
        }
        mine.push(b);
        let set = bindings.get(id);
        if (!set) bindings.set(id, (set = new Set()));
        set.add(b);
        pump(b); // anything numbered between the handshake's read and this binding
      }
    });
    ws.on('close', () => {
      clearInterval(timer);
      for (const b of mine) {
        clearInterval(b.heartbeat);
        const set = bindings.get(b.id);
        set?.delete(b);
        if (set && !set.size) bindings.delete(b.id);
      }
    });
    ws.on('error', () => undefined);
  };

  const listening = db
    .listen(SUBSCRIPTION_CHANNEL, {
      notify: (ids) => {
        for (const id of ids.split(',')) for (const b of bindings.get(id) ?? []) pump(b);
      },
      // Listening again after a lost connection: a NOTIFY may have been missed, so every socket catches up.
      ready: () => {
        for (const set of bindings.values()) for (const b of set) pump(b);
      },
    })
    .catch((err) => {
      log.error('subscription websocket listener not started', { error: String(err) });
      return undefined;
    });

  return {
    async close() {
      closing = true;
      server.off('upgrade', onUpgrade);
      for (const ws of wss.clients) ws.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await (await listening)?.();
    },
  };
}
