/**
 * MLLP (HL7 v2 Minimal Lower Layer Protocol): each message is framed <VT> message <FS><CR>. Any number of messages
 * per connection, answered in the order they came. A frame larger than `maxBytes` is not kept in memory: its start
 * (where the MSH is) is kept for the answer, the rest skipped to the frame's end. Bytes outside a frame are ignored;
 * a connection closed inside a frame loses that frame only (no one is left to answer), and so does a frame a start
 * block (<VT>) cuts short: it starts the next frame.
 */
import { createServer, type Server, type Socket } from 'node:net';

const VT = 0x0b;
const FS = 0x1c;
const CR = 0x0d;
/** What is kept of a frame too large to take: enough for its MSH, to answer in its own encoding and version. */
const HEAD_BYTES = 4096;
/**
 * A frame begun and then silent this long is given up, and its connection closed (a sender that died mid-frame, or one
 * holding connections open a byte at a time); a connection idle between frames stays open, as senders keep theirs.
 */
const FRAME_STALL_MS = 60_000;
/**
 * Connections open at once at most (what a facility's systems need is a few): a new one beyond closes the one idle
 * longest between frames, so that connections held open and silent cannot lock a sending system out; when every
 * one is in the middle of a frame, the one whose frame began longest ago (a sender's frame takes milliseconds; 256
 * frames begun and fed a byte a second, never stalled, locked every sender out).
 */
const MAX_CONNECTIONS = 256;

export type Frame = { kind: 'message'; bytes: Buffer } | { kind: 'too-large'; head: Buffer; size: number };

/** Sends a message on the frame's connection later (an application acknowledgement), after every answer so far; false if the connection is gone. */
export type Later = (text: string) => boolean;

/** The answer to one frame, already framed by the server; undefined: no answer (enhanced mode may say so). */
export type FrameHandler = (frame: Frame, later: Later) => Promise<string | undefined>;

/** Each server's connections, with what is known of each (for stopMllpServer, and the most connections). */
const connections = new WeakMap<Server, Map<Socket, Served>>();

export function startMllpServer(
  host: string,
  port: number,
  maxBytes: number,
  handle: FrameHandler,
  onError: (err: Error) => void,
  limits: { stallMs?: number; maxConnections?: number } = {},
): Promise<Server> {
  const served = new Map<Socket, Served>();
  const most = limits.maxConnections ?? MAX_CONNECTIONS;
  const server = createServer((socket) => {
    if (served.size >= most) {
      let idlest: [Socket, Served] | undefined;
      let slowest: [Socket, Served] | undefined;
      for (const entry of served) {
        const frameSince = entry[1].frameSince;
        if (frameSince === undefined) {
          if (!idlest || entry[1].since < idlest[1].since) idlest = entry;
        } else if (!slowest || frameSince < slowest[1].frameSince!) slowest = entry;
      }
      const closed = (idlest ?? slowest)!;
      closed[0].destroy();
      served.delete(closed[0]);
    }
    socket.once('close', () => served.delete(socket));
    served.set(socket, serveConnection(socket, maxBytes, handle, onError, limits.stallMs ?? FRAME_STALL_MS));
  });
  connections.set(server, served);
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve(server);
    });
  });
}

/** Stops listening and closes every connection (a sender reconnects to the next run; what it was not answered, it resends). */
export function stopMllpServer(server: Server): Promise<void> {
  const closed = new Promise<void>((resolve) => server.close(() => resolve()));
  for (const socket of connections.get(server)?.keys() ?? []) socket.destroy();
  return closed;
}

export function frame(text: string): Buffer {
  const body = Buffer.from(text, 'utf8');
  return Buffer.concat([Buffer.from([VT]), body, Buffer.from([FS, CR])]);
}

/** A connection being served: since when it has said nothing, and since when its frame in progress began (performance.now()). */
interface Served {
  since: number;
  frameSince: number | undefined;
}

function serveConnection(socket: Socket, maxBytes: number, handle: FrameHandler, onError: (err: Error) => void, stallMs: number): Served {
  const deframer = new MllpDeframer(maxBytes);
  const served: Served = { since: performance.now(), frameSince: undefined };
  socket.setTimeout(stallMs, () => {
    if (deframer.midFrame) socket.destroy();
  });
  // Answers go out in the order the frames came, whatever order their handling ends in.
  let chain: Promise<void> = Promise.resolve();
  const later: Later = (text) => {
    if (socket.destroyed) return false;
    chain = chain.then(() => {
      if (!socket.destroyed) socket.write(frame(text));
    });
    return true;
  };
  socket.on('data', (data: Buffer) => {
    const now = (served.since = performance.now());
    const wasMid = deframer.midFrame;
    const frames = deframer.push(data);
    // A frame begun in these bytes (after none, or after one they ended) began now; one carried on keeps its start.
    served.frameSince = !deframer.midFrame ? undefined : wasMid && !frames.length ? served.frameSince : now;
    for (const done of frames) {
      const answer = handle(done, later);
      chain = chain
        .then(() => answer)
        .then((reply) => {
          if (reply !== undefined && !socket.destroyed) socket.write(frame(reply));
        })
        .catch((err: unknown) => onError(err as Error));
    }
  });
  socket.on('error', (err) => onError(err));
  return served;
}

/** The frames of one connection's bytes, as they come in reads of any size. */
export class MllpDeframer {
  private inFrame = false;
  private chunks: Buffer[] = [];
  private kept = 0;
  private size = 0;
  /** The last read ended with FS: a CR first in the next ends the frame. */
  private pendingFs = false;

  constructor(private readonly maxBytes: number) {}

  /** A frame has begun and not ended. */
  get midFrame(): boolean {
    return this.inFrame;
  }

  push(data: Buffer): Frame[] {
    const out: Frame[] = [];
    let start = 0;
    for (let i = 0; i < data.length; i++) {
      const b = data[i]!;
      if (!this.inFrame) {
        if (b === VT) {
          this.inFrame = true;
          this.pendingFs = false;
          start = i + 1;
        }
        continue;
      }
      if (b === VT) {
        // A start block inside a frame (never a character of a message): the sender gave up on the frame it was
        // sending and starts another; the one cut short is dropped, not joined to the next.
        this.drop();
        start = i + 1;
        continue;
      }
      if (this.pendingFs) {
        this.pendingFs = false;
        if (b === CR) {
          out.push(this.finish());
          continue;
        }
        this.keep(Buffer.from([FS])); // an FS inside the message after all
      }
      if (b === FS) {
        if (i + 1 === data.length) {
          this.keep(data.subarray(start, i));
          this.pendingFs = true;
          start = data.length;
        } else if (data[i + 1] === CR) {
          this.keep(data.subarray(start, i));
          out.push(this.finish());
          i++;
        }
      }
    }
    if (this.inFrame && start < data.length) this.keep(data.subarray(start));
    return out;
  }

  private keep(bytes: Buffer): void {
    this.size += bytes.length;
    const room = this.size <= this.maxBytes ? bytes.length : Math.max(0, Math.min(bytes.length, HEAD_BYTES - this.kept));
    if (room) {
      this.chunks.push(room === bytes.length ? bytes : bytes.subarray(0, room));
      this.kept += room;
    }
  }

  private drop(): void {
    this.chunks = [];
    this.kept = 0;
    this.size = 0;
    this.pendingFs = false;
  }

  private finish(): Frame {
    const bytes = Buffer.concat(this.chunks);
    const done: Frame = this.size > this.maxBytes ? { kind: 'too-large', head: bytes.subarray(0, HEAD_BYTES), size: this.size } : { kind: 'message', bytes };
    this.drop();
    this.inFrame = false;
    return done;
  }
}
