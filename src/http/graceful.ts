import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import { Server as NetServer, type Socket } from 'node:net';

/**
 * On a loaded machine the kernel hands the server a connection, and its request, late: on loopback the handshake's
 * last step and the request's bytes are processed in softirq context, which a busy machine defers to ksoftirqd, so
 * a connection the client has written its whole request on may reach the listen backlog a second or more later (a
 * CI run under full load lost 56 of 100 searches to ECONNRESET when these bounds were 100 ms / 1 s / 2 s). The
 * bounds below are the patience for that lateness; on a quiet machine shutdown waits only QUIET_MS beyond its work.
 *
 * The server goes on accepting until no connection has arrived for QUIET_MS (at most ACCEPT_MS, and at most a
 * quarter of the grace): closing the listener resets every connection still waiting in the backlog, request and all.
 */
const QUIET_MS = 250;
const ACCEPT_MS = 10_000;
/**
 * A connection that has sent nothing is ended once it has been open this long and no request is being answered:
 * until then its request may be on its way (above), or in the socket's buffer, not yet read (the event loop was busy).
 */
const FRESH_CONNECTION_MS = 5000;

interface Connection {
  /** When it was accepted. */
  since: number;
  /** Requests of this connection being answered now. */
  active: number;
  /** Requests answered on it so far. */
  served: number;
}

/**
 * A graceful stop of an HTTP server that loses no request in flight. node's own `server.close()` (since 19) closes
 * every connection without a request in flight at once, and so resets connections accepted but whose request is
 * not parsed yet, and keep-alive sockets a client is about to reuse. Here instead, at `stop`: the server goes on
 * accepting the connections already on their way until none has arrived for QUIET_MS, then refuses new ones; every
 * request in flight, and any that arrives on a connection already open, is answered with `Connection: close`, and
 * the connection ends after its answer; idle keep-alive connections end now, connections that have sent nothing
 * once they are FRESH_CONNECTION_MS old and nothing is being answered; whatever is left is cut at `graceMs`.
 */
export function gracefulStop(server: Server): { stop(graceMs: number): Promise<void> } {
  const connections = new Map<Socket, Connection>();
  const inFlight = new Set<ServerResponse>();
  let stopping = false;

  let accepted = 0;
  let lastConnection = 0;
  server.on('connection', (socket: Socket) => {
    accepted++;
    lastConnection = Date.now();
    connections.set(socket, { since: lastConnection, active: 0, served: 0 });
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

  /** Idle keep-alive connections; with `freshBefore`, also those accepted before it that have sent nothing at all. */
  const endIdle = (freshBefore = 0) => {
    for (const [socket, c] of connections) {
      const fresh = c.served === 0 && socket.bytesRead === 0 && c.since < freshBefore;
      if (c.active === 0 && (c.served > 0 || fresh)) socket.end();
    }
  };
  const pollPhase = () => new Promise((resolve) => setImmediate(resolve));
  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

  return {
    async stop(graceMs: number) {
      stopping = true;
      const started = Date.now();
      for (const res of inFlight) if (!res.headersSent) res.setHeader('Connection', 'close');
      endIdle();
      // Accept what is waiting in the backlog: each look comes after a poll phase (setImmediate), where libuv
      // accepts; quiet means no connection in that poll phase and none for QUIET_MS.
      for (let seen = accepted; ; seen = accepted) {
        await sleep(QUIET_MS);
        await pollPhase();
        const quiet = accepted === seen && Date.now() - lastConnection >= QUIET_MS;
        if (quiet || Date.now() - started >= Math.min(ACCEPT_MS, graceMs / 4)) break;
      }
      // net.Server's close: stop listening, call back once every connection has ended (http.Server's would also
      // close the idle ones at once).
      let closed = false;
      const allClosed = new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
      void allClosed.then(() => (closed = true));
      endIdle();
      // Until every connection has ended or the grace is over: connections that have sent nothing end once old
      // enough, and only while nothing is being answered (a busy event loop may not have read their request yet).
      while (!closed && Date.now() - started < graceMs) {
        await Promise.race([allClosed, sleep(Math.min(QUIET_MS, Math.max(0, graceMs - (Date.now() - started))))]);
        if (!closed && inFlight.size === 0) endIdle(Date.now() - Math.min(FRESH_CONNECTION_MS, graceMs));
      }
      server.closeAllConnections();
    },
  };
}
