/**
 * The agent's durable queue (docs/hl7-v2.md "What the agent keeps"): what was acknowledged AA is on disk first.
 * `messages.log` holds one JSON line per accepted message (its control id first), appended and fdatasync'd before
 * `accept` resolves (the ACK waits for it). Group commit: the messages that arrive while one write and sync is under
 * way go together in the next, so a burst shares few syncs, and the sync runs off the event loop (translation and
 * ACKs go on meanwhile). `sent.log` holds the control ids Pont has confirmed, and before each batch is sent, its ids
 * (`>` and a JSON list): after a crash the batches that were on their way (two may be: src/agent/agent.ts) are sent
 * again first, in the order they were sent, each as it was and under the same batch id, so Pont answers them from what
 * it kept instead of writing them twice.
 *
 * The backlog stays on disk: memory holds each pending message's control id and where its line is (a 100,000-message
 * backlog is a few MB, not its FHIR); a batch is read back from the file when it is sent. At start `messages.log` is
 * scanned in chunks for the ids at the start of its lines (never read whole: it may be GBs); a line cut short by a
 * crash (never synced, so never acknowledged) is cut off. MSH-10 is the key: a control id seen before is not queued
 * again. When nothing is pending and the log has grown, the ids are kept in `ids.log` and both logs start empty.
 */
import { closeSync, existsSync, fdatasync, fsyncSync, ftruncateSync, fstatSync, openSync, readFileSync, readSync, renameSync, write, writeSync } from 'node:fs';
import { join } from 'node:path';
import { makeDirectorySync } from '../core/directories';
import { promisify } from 'node:util';

const fdatasyncAsync = promisify(fdatasync);
const writeAsync = promisify(write) as (fd: number, buffer: Buffer, offset: number, length: number) => Promise<{ bytesWritten: number }>;

/**
 * Appends all of `bytes` at `size` (the file's length now) and syncs them, off the event loop (libuv's threads); when
 * that fails, the file is cut back to `size` before the error is thrown: no half line stays for the next append to follow.
 */
async function appendSynced(fd: number, bytes: Buffer, size: number): Promise<void> {
  try {
    for (let done = 0; done < bytes.length; ) done += (await writeAsync(fd, bytes, done, bytes.length - done)).bytesWritten;
    await fdatasyncAsync(fd);
  } catch (err) {
    try {
      ftruncateSync(fd, size);
    } catch {
      // the next start reads what it can, cutting what is cut short
    }
    throw err;
  }
}

export interface QueuedMessage {
  /** MSH-10, the message control id. */
  id: string;
  /** MSH-9 (e.g. ORU^R01), for logs. */
  type: string;
  received_at: string;
  /** The FHIR resources the maps gave when it was accepted: what is sent, whatever map edit comes later. */
  resources: unknown[];
}

/** A message accepted and not yet confirmed: its line in messages.log. */
interface Pending {
  id: string;
  offset: number;
  length: number;
}

const COMPACT_BYTES = 64 * 1024 * 1024;
const SCAN_CHUNK = 1024 * 1024;
/** Enough of a line's start to hold `{"id":"<MSH-3|MSH-4|MSH-10>"` as senders write them; a longer one is read from its whole line (idOf). */
const HEAD_BYTES = 1024;
const ID_AT_START = /^\{"id":("(?:[^"\\]|\\.)*")/;

/** The complete lines of a small log (sent.log, ids.log); a last line cut by a crash is cut off the file too. */
function readLines(file: string): string[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  const end = text.lastIndexOf('\n') + 1;
  if (end < text.length) truncate(file, Buffer.byteLength(text.slice(0, end)));
  return text.slice(0, end).split('\n').filter(Boolean);
}

function truncate(file: string, size: number): void {
  const fd = openSync(file, 'r+');
  ftruncateSync(fd, size);
  fsyncSync(fd);
  closeSync(fd);
}

/**
 * Each complete line of a large log, in chunks: its offset, length and the first bytes of it (where the id is).
 * A last line without its newline is cut off the file.
 */
function scanLines(file: string, each: (offset: number, length: number, head: Buffer) => void): void {
  if (!existsSync(file)) return;
  const fd = openSync(file, 'r');
  const chunk = Buffer.allocUnsafe(SCAN_CHUNK);
  let position = 0;
  let lineStart = 0;
  let head: Buffer[] = [];
  let headBytes = 0;
  try {
    for (let read = readSync(fd, chunk, 0, SCAN_CHUNK, 0); read > 0; read = readSync(fd, chunk, 0, SCAN_CHUNK, position)) {
      let from = 0;
      for (let nl = chunk.indexOf(0x0a, 0); nl !== -1 && nl < read; nl = chunk.indexOf(0x0a, nl + 1)) {
        if (headBytes < HEAD_BYTES) head.push(Buffer.from(chunk.subarray(from, Math.min(nl, from + HEAD_BYTES - headBytes))));
        const end = position + nl;
        each(lineStart, end - lineStart, Buffer.concat(head));
        lineStart = end + 1;
        from = nl + 1;
        head = [];
        headBytes = 0;
      }
      if (headBytes < HEAD_BYTES && from < read) {
        const part = Buffer.from(chunk.subarray(from, Math.min(read, from + HEAD_BYTES - headBytes)));
        head.push(part);
        headBytes += part.length;
      }
      position += read;
    }
  } finally {
    closeSync(fd);
  }
  if (lineStart < position) truncate(file, lineStart);
}

export class DurableQueue {
  private readonly messagesFile: string;
  private readonly sentFile: string;
  private readonly idsFile: string;
  /** Appended to (off the event loop: appendSynced); batches are read back through readFd. */
  private messagesFd: number;
  private readFd: number;
  private sentFd: number;
  /** Where the next line of messages.log starts. */
  private end: number;
  /** Every control id ever accepted (the idempotency keys). */
  private readonly seen = new Set<string>();
  /** Accepted, not yet confirmed by Pont, in order: ids and where their lines are. */
  private backlog: Pending[] = [];
  /** Given to accept, not yet on disk: the next write takes them all. */
  private waiting: Array<{ line: Buffer; id: string; resolve: () => void; reject: (err: Error) => void }> = [];
  /** Being written or waiting to be: a resend of one waits for it (AA only once it is on disk). */
  private readonly unsynced = new Map<string, Promise<void>>();
  private writing = false;
  /** The ids of each batch sent and not yet confirmed, in the order they were sent (after a crash: sent again first, as they were). */
  private intents: string[][] = [];
  /** sent.log's appends, one after the other (two batches may be on their way: their lines keep their order). */
  private sentWrites: Promise<void> = Promise.resolve();

  constructor(readonly dir: string) {
    makeDirectorySync(dir, 0o700);
    this.messagesFile = join(dir, 'messages.log');
    this.sentFile = join(dir, 'sent.log');
    this.idsFile = join(dir, 'ids.log');
    for (const id of readLines(this.idsFile)) this.seen.add(id);
    const sent = new Set<string>();
    const intents: string[][] = [];
    for (const line of readLines(this.sentFile)) {
      if (line.startsWith('=')) sent.add(confirmedId(line));
      else if (!line.startsWith('>')) sent.add(line);
      else {
        // A list cut short by a failed write and followed by the next one is no list: that batch is made again.
        const ids = parseIds(line.slice(1));
        if (ids) intents.push(ids);
      }
    }
    this.intents = intents.filter((ids) => ids.some((id) => !sent.has(id)));
    scanLines(this.messagesFile, (offset, length, head) => {
      const id = idOf(head, this.messagesFile, offset, length);
      this.seen.add(id);
      if (!sent.has(id)) this.backlog.push({ id, offset, length });
    });
    this.messagesFd = openSync(this.messagesFile, 'a', 0o600);
    this.readFd = openSync(this.messagesFile, 'r');
    this.sentFd = openSync(this.sentFile, 'a', 0o600);
    this.end = fstatSync(this.messagesFd).size;
    // The directory entries of files just created survive a power loss too.
    const dirFd = openSync(dir, 'r');
    fsyncSync(dirFd);
    closeSync(dirFd);
  }

  get size(): number {
    return this.backlog.length;
  }

  /**
   * Whether this control id was accepted before (a resend: answer AA, change nothing): undefined if not, else a
   * promise that resolves once the first copy is on disk (at once if it already is).
   */
  accepted(id: string): Promise<void> | undefined {
    if (this.seen.has(id)) return Promise.resolve();
    return this.unsynced.get(id);
  }

  /** Whether this control id is accepted and not yet confirmed by Pont (a scan: asked only for a resend that wants an application ACK). */
  pending(id: string): boolean {
    return this.backlog.some((p) => p.id === id);
  }

  /** Resolves once the message is on disk (written and synced); only then may it be acknowledged. */
  accept(message: QueuedMessage): Promise<void> {
    const before = this.accepted(message.id);
    if (before) return before;
    const done = new Promise<void>((resolve, reject) => {
      this.waiting.push({ line: Buffer.from(`${JSON.stringify(message)}\n`), id: message.id, resolve, reject });
    });
    this.unsynced.set(message.id, done);
    if (!this.writing) void this.write();
    return done;
  }

  /** Writes and syncs what is waiting, again and again until nothing is (group commit, see the file's comment). */
  private async write(): Promise<void> {
    this.writing = true;
    // What arrives in this turn of the event loop goes with the first write.
    await new Promise((resolve) => setImmediate(resolve));
    while (this.waiting.length) {
      const group = this.waiting;
      this.waiting = [];
      try {
        await appendSynced(this.messagesFd, Buffer.concat(group.map((w) => w.line)), this.end);
      } catch (err) {
        // Nothing of the group was acknowledged.
        for (const w of group) {
          this.unsynced.delete(w.id);
          w.reject(err as Error);
        }
        continue;
      }
      for (const w of group) {
        this.seen.add(w.id);
        this.unsynced.delete(w.id);
        this.backlog.push({ id: w.id, offset: this.end, length: w.line.length - 1 });
        this.end += w.line.length;
        w.resolve();
      }
    }
    this.writing = false;
  }

  /** The oldest messages not yet confirmed after the first `skip` (those on their way), in order, read back from disk. */
  peek(max: number, skip = 0): QueuedMessage[] {
    return this.read(this.backlog.slice(skip, skip + max));
  }

  private read(pending: Pending[]): QueuedMessage[] {
    if (!pending.length) return [];
    // Pending lines follow one another in the file: one read for the whole batch.
    const first = pending[0]!;
    const last = pending[pending.length - 1]!;
    const bytes = Buffer.allocUnsafe(last.offset + last.length - first.offset);
    for (let done = 0; done < bytes.length; ) {
      const n = readSync(this.readFd, bytes, done, bytes.length - done, first.offset + done);
      if (n === 0) throw new Error(`messages.log ends before the message ${last.id}`);
      done += n;
    }
    return pending.map((p) => JSON.parse(bytes.toString('utf8', p.offset - first.offset, p.offset - first.offset + p.length)) as QueuedMessage);
  }

  /**
   * The control ids of the oldest batch sent and not confirmed (on its way now, or interrupted by a crash or a failed
   * send), if its messages still head the backlog (peek them): to be sent exactly as it was. One confirmed in part (a
   * crash while its ids were appended) is forgotten: what is left of it goes in a batch made again.
   */
  interrupted(): string[] | undefined {
    while (this.intents.length) {
      const ids = this.intents[0]!;
      if (this.startsWith(ids)) return ids;
      this.intents.shift();
    }
    return undefined;
  }

  /** The control ids of each batch sent and not confirmed, in the order sent. */
  unconfirmed(): readonly string[][] {
    return this.intents;
  }

  /** Whether the backlog starts with these control ids, in this order. */
  startsWith(ids: string[]): boolean {
    return this.backlog.length >= ids.length && ids.every((id, i) => this.backlog[i]!.id === id);
  }

  /** Said before a batch is sent: which messages it holds (see the file's comment); once for a batch sent again. */
  async sending(messages: QueuedMessage[]): Promise<void> {
    const ids = messages.map((m) => m.id);
    if (this.intents.some((sent) => sent.length === ids.length && sent[0] === ids[0])) return;
    await this.appendSent(`>${JSON.stringify(ids)}\n`);
    this.intents.push(ids);
  }

  /**
   * Their batch will not be sent again as it was (Pont refused it whole): forgotten as sent, in memory only (after a
   * restart it goes once more as it was). Its messages stay in the backlog, to go in other batches.
   */
  retract(messages: QueuedMessage[]): void {
    this.intents = this.intents.filter((ids) => ids[0] !== messages[0]!.id);
  }

  /** Pont has them: they leave the backlog (a batch's messages follow one another in it, as peek gave them). */
  async confirm(messages: QueuedMessage[]): Promise<void> {
    if (!messages.length) return;
    await this.appendSent(messages.map((m) => `${confirmedLine(m.id)}\n`).join(''));
    const at = this.backlog.findIndex((p) => p.id === messages[0]!.id);
    if (at >= 0) this.backlog.splice(at, messages.length);
    this.intents = this.intents.filter((ids) => ids[0] !== messages[0]!.id);
    if (!this.backlog.length && !this.waiting.length && !this.writing && this.end > COMPACT_BYTES) this.compact();
  }

  private appendSent(text: string): Promise<void> {
    const appended = this.sentWrites.then(() => appendSynced(this.sentFd, Buffer.from(text), fstatSync(this.sentFd).size));
    this.sentWrites = appended.catch(() => undefined);
    return appended;
  }

  /** Everything is confirmed and nothing is being written: keep the ids, start both logs again (synchronous: no accept comes between). */
  private compact(): void {
    const ids: string[] = [];
    scanLines(this.messagesFile, (offset, length, head) => ids.push(idOf(head, this.messagesFile, offset, length)));
    const fd = openSync(this.idsFile, 'a', 0o600);
    writeSync(fd, ids.map((id) => `${id}\n`).join(''));
    fsyncSync(fd);
    closeSync(fd);
    // messages.log first: a crash between the two leaves ids in sent.log that nothing pending has.
    for (const [file, which] of [[this.messagesFile, 'messagesFd'], [this.sentFile, 'sentFd']] as const) {
      closeSync(this[which]);
      const fresh = `${file}.new`;
      closeSync(openSync(fresh, 'w', 0o600));
      renameSync(fresh, file);
      this[which] = openSync(file, 'a', 0o600);
    }
    closeSync(this.readFd);
    this.readFd = openSync(this.messagesFile, 'r');
    this.end = 0;
  }

  /** Once what is being written is on disk (or failed). */
  async close(): Promise<void> {
    while (this.writing) await new Promise((resolve) => setTimeout(resolve, 5));
    for (const fd of [this.messagesFd, this.readFd, this.sentFd]) closeSync(fd);
  }
}

/**
 * sent.log's line of a confirmed id: the id itself, unless it starts as a batch's line does (`>`, a sender's MSH-3
 * `>SYS`) or as this form does (`=`): then `=` and the id as JSON, which a restart reads back as the id (not as a batch
 * whose list does not parse, which left the message unconfirmed and sent it again, undoing what came after it).
 */
function confirmedLine(id: string): string {
  return id.startsWith('>') || id.startsWith('=') ? `=${JSON.stringify(id)}` : id;
}

function confirmedId(line: string): string {
  try {
    const id: unknown = JSON.parse(line.slice(1));
    if (typeof id === 'string') return id;
  } catch {
    // an id of an earlier agent that started with `=`, written as it was
  }
  return line;
}

function parseIds(text: string): string[] | undefined {
  try {
    const ids: unknown = JSON.parse(text);
    return Array.isArray(ids) && ids.every((id) => typeof id === 'string') ? ids : undefined;
  } catch {
    return undefined;
  }
}

function idOf(head: Buffer, file?: string, offset = 0, length = 0): string {
  const m = ID_AT_START.exec(head.toString('utf8'));
  // A key longer than the head (a sender's MSH-3, MSH-4 or MSH-10 of a thousand characters, which the agent took):
  // read from its whole line, so that one message cannot keep the agent from starting again.
  if (!m && file && head.length >= HEAD_BYTES) {
    const fd = openSync(file, 'r');
    try {
      const line = Buffer.allocUnsafe(length);
      readSync(fd, line, 0, length, offset);
      const id: unknown = (JSON.parse(line.toString('utf8')) as { id?: unknown }).id;
      if (typeof id === 'string') return id;
    } finally {
      closeSync(fd);
    }
  }
  if (!m) throw new Error(`messages.log: a line does not start with its control id: ${head.toString('utf8', 0, 80)}`);
  return JSON.parse(m[1]!) as string;
}
