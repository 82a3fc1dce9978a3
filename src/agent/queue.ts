/**
 * The agent's durable queue (docs/hl7-v2.md "What the agent keeps"): what was acknowledged AA is on disk first.
 * `messages.log` holds one JSON line per accepted message, appended and fsync'd before `accept` resolves (the ACK
 * waits for it; concurrent accepts share one write and one fsync). `sent.log` holds the control ids Pont has
 * confirmed, and before each batch is sent, its ids (`>` and a JSON list): after a crash the same batch is sent
 * again first, under the same batch id, so Pont answers it from what it kept instead of writing it twice. At start both are read: the messages not confirmed are the backlog, in the order they came; a line
 * cut short by a crash (never fsync'd, so never acknowledged) is dropped. MSH-10 is the key: a control id seen
 * before is not queued again. When nothing is pending and the log has grown, the ids are kept in `ids.log` and
 * the two logs start again empty.
 */
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, renameSync, statSync, writeSync, ftruncateSync } from 'node:fs';
import { join } from 'node:path';

export interface QueuedMessage {
  /** MSH-10, the message control id. */
  id: string;
  /** MSH-9 (e.g. ORU^R01), for logs. */
  type: string;
  received_at: string;
  /** The FHIR resources the maps gave when it was accepted: what is sent, whatever map edit comes later. */
  resources: unknown[];
}

const COMPACT_BYTES = 64 * 1024 * 1024;

/** The complete lines of a log; a last line without its newline (cut by a crash) is cut off the file too. */
function readLines(file: string): string[] {
  if (!existsSync(file)) return [];
  const text = readFileSync(file, 'utf8');
  const end = text.lastIndexOf('\n') + 1;
  if (end < Buffer.byteLength(text)) {
    const fd = openSync(file, 'r+');
    ftruncateSync(fd, Buffer.byteLength(text.slice(0, end)));
    fsyncSync(fd);
    closeSync(fd);
  }
  return text.slice(0, end).split('\n').filter(Boolean);
}

export class DurableQueue {
  private readonly messagesFile: string;
  private readonly sentFile: string;
  private readonly idsFile: string;
  private messagesFd: number;
  private sentFd: number;
  /** Every control id ever accepted (the idempotency keys). */
  private readonly seen = new Set<string>();
  /** Accepted, not yet confirmed by Pont, in order. */
  private backlog: QueuedMessage[] = [];
  private waiting: Array<{ line: string; message: QueuedMessage; resolve: () => void; reject: (err: Error) => void }> = [];
  private flushing = false;
  /** The ids of the batch sent last and not confirmed (after a crash): sent again first, as it was. */
  private inFlight: string[] | undefined;

  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.messagesFile = join(dir, 'messages.log');
    this.sentFile = join(dir, 'sent.log');
    this.idsFile = join(dir, 'ids.log');
    for (const id of readLines(this.idsFile)) this.seen.add(id);
    const sent = new Set<string>();
    let intent: string[] = [];
    for (const line of readLines(this.sentFile)) {
      if (line.startsWith('>')) intent = JSON.parse(line.slice(1)) as string[];
      else sent.add(line);
    }
    this.inFlight = intent.some((id) => !sent.has(id)) ? intent : undefined;
    for (const line of readLines(this.messagesFile)) {
      const message = JSON.parse(line) as QueuedMessage;
      this.seen.add(message.id);
      if (!sent.has(message.id)) this.backlog.push(message);
    }
    this.messagesFd = openSync(this.messagesFile, 'a', 0o600);
    this.sentFd = openSync(this.sentFile, 'a', 0o600);
  }

  get size(): number {
    return this.backlog.length;
  }

  /** Whether this control id was accepted before (a resend: answer AA, change nothing). */
  has(id: string): boolean {
    return this.seen.has(id) || this.waiting.some((w) => w.message.id === id);
  }

  /** Resolves once the message is on disk (fsync'd); only then may it be acknowledged. */
  accept(message: QueuedMessage): Promise<void> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ line: `${JSON.stringify(message)}\n`, message, resolve, reject });
      if (!this.flushing) {
        this.flushing = true;
        setImmediate(() => this.flush());
      }
    });
  }

  private flush(): void {
    const batch = this.waiting;
    this.waiting = [];
    try {
      writeSync(this.messagesFd, batch.map((w) => w.line).join(''));
      fsyncSync(this.messagesFd);
      for (const w of batch) {
        this.seen.add(w.message.id);
        this.backlog.push(w.message);
        w.resolve();
      }
    } catch (err) {
      for (const w of batch) w.reject(err as Error);
    }
    if (this.waiting.length) setImmediate(() => this.flush());
    else this.flushing = false;
  }

  /** The oldest messages not yet confirmed, in order. */
  peek(max: number): QueuedMessage[] {
    return this.backlog.slice(0, max);
  }

  /** The batch a crash interrupted, if any (the head of the backlog): to be sent again exactly as it was. */
  interrupted(): QueuedMessage[] | undefined {
    if (!this.inFlight) return undefined;
    const ids = new Set(this.inFlight);
    const head = this.backlog.slice(0, ids.size);
    return head.length === ids.size && head.every((m) => ids.has(m.id)) ? head : undefined;
  }

  /** Said before a batch is sent: which messages it holds (see the file's comment). */
  sending(messages: QueuedMessage[]): void {
    writeSync(this.sentFd, `>${JSON.stringify(messages.map((m) => m.id))}\n`);
    fsyncSync(this.sentFd);
    this.inFlight = messages.map((m) => m.id);
  }

  /** Pont has them: they leave the backlog (the first `count` of it, as peek gave them). */
  confirm(messages: QueuedMessage[]): void {
    writeSync(this.sentFd, messages.map((m) => `${m.id}\n`).join(''));
    fsyncSync(this.sentFd);
    this.backlog.splice(0, messages.length);
    this.inFlight = undefined;
    if (!this.backlog.length && !this.waiting.length && statSync(this.messagesFile).size > COMPACT_BYTES) this.compact();
  }

  /** Everything is confirmed: keep the ids, start both logs again. */
  private compact(): void {
    const ids = readLines(this.messagesFile).map((line) => (JSON.parse(line) as QueuedMessage).id);
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
  }

  close(): void {
    closeSync(this.messagesFd);
    closeSync(this.sentFd);
  }
}
