import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';

/**
 * How long a connection that has sent no request yet is given at shutdown to send one (and longer while requests
 * are still being answered): it was accepted before the signal, its request may be in the socket's buffer, not yet
 * parsed (the event loop was busy).
 */
const FRESH_CONNECTION_MS = 2000;
/**
 * At shutdown the server goes on accepting until no connection has arrived for QUIET_MS (at most ACCEPT_MS): a
 * connection the kernel completed before the signal waits in the listen backlog until the event loop accepts it,
 * and closing the listener then would reset it, request and all (the kernel cannot tell it from a new one).
 */
const QUIET_MS = 100;
const ACCEPT_MS = 1000;

interface Connection {
  /** Requests of this connection being answered now. */
  active: number;
  /** Requests answered on it so far. */
  served: number;
}

/**
 * A graceful stop of an HTTP server that loses no request in flight. node's own `server.close()` (since 19) closes
 * every connection without a request in flight at once, and so resets connections accepted but whose request is
 * not parsed yet, and keep-alive sockets a client is about to reuse. Here instead, at `stop`: the server stops
 * listening once the connections already on their way are accepted (QUIET_MS), then new ones are refused; every request in flight, and any that arrives on a connection already
 * open, is answered with `Connection: close`, and the connection ends after its answer; idle keep-alive connections
 * end now, connections that have sent nothing yet after FRESH_CONNECTION_MS; whatever is left is cut at `graceMs`.
 */
export function gracefulStop(server: Server): { stop(graceMs: number): Promise<void> } {
  const connections = new Map<Socket, Connection>();
  const inFlight = new Set<ServerResponse>();
  let stopping = false;

  let lastConnection = 0;
  server.on('connection', (socket: Socket) => {
    lastConnection = Date.now();
    connections.set(socket, { active: 0, served: 0 });
    socket.once('close', () => connections.delete(socket));
  });
  server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const connection = connections.get(req.socket);
    if (connection) connection.active++;
    inFlight.add(res);
    if (stopping) res.setHeader('Connection', 'close');
    res.once('close', () => {
      inFlight.delete(res);
      if (!connection) return;
      connection.active--;
      connection.served++;
      if (stopping && connection.active === 0) req.socket.end();
    });
  });

  const endIdle = (fresh: boolean) => {
    for (const [socket, c] of connections) if (c.active === 0 && (fresh || c.served > 0)) socket.end();
  };

  return {
    async stop(graceMs: number) {
      stopping = true;
      for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
      endIdle(false);
      // Accept what is waiting in the backlog: each look comes after a poll phase (setImmediate), where libuv accepts.
      const started = Date.now();
      do {
        await new Promise((resolve) => setTimeout(resolve, QUIET_MS));
        await new Promise((resolve) => setImmediate(resolve));
      } while (Date.now() - lastConnection < QUIET_MS && Date.now() - started < Math.min(ACCEPT_MS, graceMs));
      // net.Server's close: stop listening, call back once every connection has ended (http.Server's would also
      // close the idle ones at once).
      const closed = new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
      endIdle(false);
      const timers: NodeJS.Timeout[] = [];
      const after = (ms: number, fn: () => void) => new Promise<void>((resolve) => timers.push(setTimeout(() => resolve(fn()), ms)));
      // A connection that has sent nothing after FRESH_CONNECTION_MS ends, but not while other requests are being
      // answered: a busy event loop (a hundred large searches) may not have read its request yet.
      const endFreshWhenQuiet = (): void => {
        if (inFlight.size) timers.push(setTimeout(endFreshWhenQuiet, QUIET_MS));
        else endIdle(true);
      };
      void after(Math.min(FRESH_CONNECTION_MS, graceMs), endFreshWhenQuiet);
      await Promise.race([closed, after(graceMs, () => undefined)]);
      for (const t of timers) clearTimeout(t);
      server.closeAllConnections();
    },
  };
}
