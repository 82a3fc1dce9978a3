/**
 * MLLP (HL7 v2 Minimal Lower Layer Protocol): each message is framed <VT> message <FS><CR>. Any number of messages
 * per connection, answered in the order they came. A frame larger than `maxBytes` is not kept in memory: its start
 * (where the MSH is) is kept for the answer, the rest skipped to the frame's end. Bytes outside a frame are ignored;
 * a connection closed inside a frame loses that frame only (no one is left to answer).
 */
import { createServer, type Server, type Socket } from 'node:net';

const VT = 0x0b;
const FS = 0x1c;
const CR = 0x0d;
/** What is kept of a frame too large to take: enough for its MSH, to answer in its own encoding and version. */
const HEAD_BYTES = 4096;

export type Frame = { kind: 'message'; bytes: Buffer } | { kind: 'too-large'; head: Buffer; size: number };

/** The answer to one frame, already framed by the server; undefined: no answer (enhanced mode may say so). */
export type FrameHandler = (frame: Frame) => Promise<string | undefined>;

const connections = new WeakMap<Server, Set<Socket>>();

export function startMllpServer(host: string, port: number, maxBytes: number, handle: FrameHandler, onError: (err: Error) => void): Promise<Server> {
  const open = new Set<Socket>();
  const server = createServer((socket) => {
    open.add(socket);
    socket.once('close', () => open.delete(socket));
    serveConnection(socket, maxBytes, handle, onError);
  });
  connections.set(server, open);
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
  for (const socket of connections.get(server) ?? []) socket.destroy();
  return closed;
}

export function frame(text: string): Buffer {
  const body = Buffer.from(text, 'utf8');
  return Buffer.concat([Buffer.from([VT]), body, Buffer.from([FS, CR])]);
}

function serveConnection(socket: Socket, maxBytes: number, handle: FrameHandler, onError: (err: Error) => void): void {
  let inFrame = false;
  let chunks: Buffer[] = [];
  let size = 0;
  let pendingFs = false; // the last byte seen was FS: a CR next ends the frame
  // Answers go out in the order the frames came, whatever order their handling ends in.
  let chain: Promise<void> = Promise.resolve();

  const finish = () => {
    const done: Frame = size > maxBytes ? { kind: 'too-large', head: Buffer.concat(chunks), size } : { kind: 'message', bytes: Buffer.concat(chunks) };
    chunks = [];
    size = 0;
    inFrame = false;
    const answer = handle(done);
    chain = chain
      .then(() => answer)
      .then((reply) => {
        if (reply !== undefined && !socket.destroyed) socket.write(frame(reply));
      })
      .catch((err: unknown) => onError(err as Error));
  };

  const keep = (bytes: Buffer) => {
    size += bytes.length;
    const kept = chunks.reduce((n, c) => n + c.length, 0);
    if (size <= maxBytes) chunks.push(bytes);
    else if (kept < HEAD_BYTES) chunks.push(bytes.subarray(0, HEAD_BYTES - kept));
  };

  socket.on('data', (data: Buffer) => {
    let start = 0;
    for (let i = 0; i < data.length; i++) {
      const b = data[i]!;
      if (!inFrame) {
        if (b === VT) {
          inFrame = true;
          pendingFs = false;
          start = i + 1;
        }
        continue;
      }
      if (pendingFs) {
        // The previous chunk ended with FS (kept back): a CR now ends the frame; anything else makes it content.
        pendingFs = false;
        if (b === CR) {
          finish();
          continue;
        }
        keep(Buffer.from([FS]));
      }
      if (b === FS) {
        if (i + 1 === data.length) {
          keep(data.subarray(start, i));
          pendingFs = true;
          start = data.length;
        } else if (data[i + 1] === CR) {
          keep(data.subarray(start, i));
          finish();
          i++;
        }
      }
    }
    if (inFrame && start < data.length) keep(data.subarray(start));
  });
  socket.on('error', (err) => onError(err));
}
