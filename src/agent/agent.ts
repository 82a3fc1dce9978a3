/**
 * The HL7 v2 Bridge agent (`pont bridge-agent --config FILE`, docs/hl7-v2.md): a process of its own that a facility
 * installs. It listens MLLP, turns each message into FHIR through the maps (mappings/v2-*.map.yaml, the same
 * directory Pont reads), keeps what it acknowledged in a durable queue, and forwards it to Pont through the Bridge
 * API with its agent key, as any installed agent would: it never opens Pont's database or imports its repository.
 */
import { isUtf8 } from 'node:buffer';
import { createHash, randomBytes } from 'node:crypto';
import type { Server } from 'node:net';
import { resolve } from 'node:path';
import { Hl7Message } from '@medplum/core';
import type { Patient } from '@medplum/fhirtypes';
import { MappingHolder, type ReloadOutcome } from '../mapping/holder';
import { defaultMappingsDir } from '../mapping/index';
import { storedReference } from '../mapping/runtime';
import { v2Charset } from '../mapping/v2-path';
import { buildAck, wantsApplicationAck, type AckCode } from './ack';
import type { AgentConfig } from './config';
import { startMllpServer, stopMllpServer, type Frame, type Later } from './mllp';
import { DurableQueue, type QueuedMessage } from './queue';
import { ErrorCondition, fieldAt, header, MAX_BATCH_BYTES, MAX_BATCH_RESOURCES, messageKey, translate, V2_MAPS, type V2Error } from './translate';

export const AGENT_VERSION = '0.1.0';

/** Messages per batch (and at most MAX_BATCH_RESOURCES resources and MAX_BATCH_BYTES of FHIR, translate.ts). */
const MAX_BATCH_MESSAGES = 200;
/**
 * Batches on their way to Pont at once. Pont writes a batch in one transaction; while one is in PostgreSQL the next is
 * checked and translated: on the 2-core machines a backlog drained 29% faster with two (307 -> 397 messages/s) and no
 * faster with three (bench:hl7, docs/hl7-v2.md).
 */
const BATCHES_IN_FLIGHT = 2;
/**
 * The least time between two sends: at most 8 requests a second (480 a minute, under Pont's default limit of 600 a
 * minute a caller, PONT_RATE_LIMITS). Messages that arrive meanwhile go in the next batch: under a steady trickle a
 * send per message would spend the limit, and every send be refused for the rest of the minute (found by an outside
 * probe: a backlog stalled about a minute).
 */
const MIN_SEND_INTERVAL_MS = 125;
/**
 * Resources Pont has confirmed, with their content, that later batches may carry unchanged beside one on its way: the
 * context results share (their Patient, their Encounter), not the results, which no other message repeats.
 */
const CONFIRMED_REMEMBERED = 10_000;
const RESULT_TYPES = new Set(['Observation', 'DiagnosticReport']);

export type Log = (level: 'info' | 'warn' | 'error', msg: string, data?: Record<string, unknown>) => void;

export interface AgentOptions {
  /** The clock (the ACKs' times, X-Bridge-Timestamp). */
  now?: () => Date;
  /** Default: PONT_MAPPINGS_DIR, else the repository's mappings/. */
  mappingsDir?: string;
  log?: Log;
  /** Seconds between heartbeats until Pont says otherwise. */
  heartbeatSeconds?: number;
}

export interface RunningAgent {
  port: number;
  backlog(): number;
  reloadMaps(): ReloadOutcome;
  close(): Promise<void>;
}

const jsonLog: Log = (level, msg, data) => process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), level, msg, ...data })}\n`);

export async function startAgent(config: AgentConfig, options: AgentOptions = {}): Promise<RunningAgent> {
  const now = options.now ?? (() => new Date());
  const log = options.log ?? jsonLog;
  const maps = new MappingHolder(options.mappingsDir ?? process.env.PONT_MAPPINGS_DIR ?? defaultMappingsDir);
  const missing = V2_MAPS.filter((name) => !maps.current().names().includes(name));
  if (missing.length) throw new Error(`the maps directory ${maps.dir} has no ${missing.map((m) => `${m}.map.yaml`).join(', ')}, which the agent reads: copy ${missing.length > 1 ? 'them' : 'it'} from Pont's mappings/`);
  let queue: DurableQueue;
  try {
    queue = new DurableQueue(config.queue_dir);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (!code) throw err;
    throw new Error(`queue_dir: cannot make the directory ${resolve(config.queue_dir)} or write in it (${code}); fix: set a directory this user may create and write, e.g. /var/lib/pont-agent/queue`);
  }
  const pont = new PontClient(config, now);
  let closed = false;

  // Enhanced mode: messages whose sender asked for an application acknowledgement (MSH-16), by their key (messageKey:
  // the sender and its control id): sent on the connection the message came on once Pont has answered for it (lost if
  // that connection is gone, or at a restart).
  const applicationAcks = new Map<string, Array<{ message: Hl7Message; later: Later }>>();
  const acknowledgeApplication = (messages: QueuedMessage[], problems: Problem[]) => {
    for (const m of messages) {
      const waiting = applicationAcks.get(m.id);
      if (!waiting) continue;
      applicationAcks.delete(m.id);
      const refused = problems.find((p) => p.control_id === m.id || p.control_ids?.includes(m.id));
      for (const { message, later } of waiting) {
        const text = refused
          ? ack(message, 'AE', { location: 'MSH', condition: ErrorCondition.internal, text: `Pont refused ${refused.resource_type ? `the ${refused.resource_type as string}` : 'part'} of this message: ${String(refused.error)}` }, true)
          : ack(message, 'AA', undefined, true);
        if (text !== undefined && !later(text)) log('warn', 'application acknowledgement not sent: the connection is closed', { control_id: m.id });
      }
    }
  };

  // ---- forwarding: at once, batched under load, two batches on their way; retried while Pont is away -----------
  let retryTimer: NodeJS.Timeout | undefined;
  /** Sends failed in a row (the backoff's), and whether a retry is awaited: nothing is sent meanwhile. */
  let failures = 0;
  let awaitingRetry = false;
  const inFlight: Batch[] = [];
  /** The next batch depends on one on its way: nothing to try until one is answered (every ACK asks the pump). */
  let waitingForAnswer = false;
  const confirmed = new ConfirmedContent(CONFIRMED_REMEMBERED);
  /**
   * Messages of a batch Pont refused whole (a request it would refuse again: 400, 413, 422), sent again one at a time:
   * what one of them carries must not cost the others their place in Pont (an AA is a promise). Kept in memory: after
   * a restart their batch goes once more as it was, is refused again, and is split again.
   */
  const alone = new Set<string>();
  /** The next batch to send now, or undefined: nothing to send, or it must wait for those on their way. */
  const nextBatch = (): Batch | undefined => {
    // The batches a crash or a failed send interrupted go again first, each as it was (same batch id), in the order
    // they were sent, one at a time (a new batch may go beside the last of them).
    if (queue.unconfirmed().some((ids) => !inFlight.some((b) => b.messages[0]!.id === ids[0]))) {
      waitingForAnswer = inFlight.length > 0;
      const interrupted = waitingForAnswer ? undefined : queue.interrupted();
      if (waitingForAnswer || interrupted) return interrupted && batchOf(queue.peek(interrupted.length), true);
    }
    // The next batch starts where those on their way end: they must be the backlog's first messages (a batch whose
    // send failed before sent.log said it was sent is not one of them: wait for the others, then start from the head).
    const sending = inFlight.flatMap((b) => b.messages.map((m) => m.id));
    if (!queue.startsWith(sending)) {
      waitingForAnswer = true;
      return undefined;
    }
    const peeked = queue.peek(MAX_BATCH_MESSAGES, sending.length);
    if (!peeked.length) return undefined;
    // A message to send alone goes by itself; the others go up to the next such one.
    const single = peeked.findIndex((m) => alone.has(m.id));
    const candidates = single === 0 ? peeked.slice(0, 1) : single > 0 ? peeked.slice(0, single) : peeked;
    const batch = batchOf(candidates, false);
    waitingForAnswer = !inFlight.every((other) => canGoBeside(batch, other, confirmed));
    return waitingForAnswer ? undefined : batch;
  };
  /** When the last batch was sent (performance.now()), and the timer of a send held back by MIN_SEND_INTERVAL_MS. */
  let lastSent = -Infinity;
  let paceTimer: NodeJS.Timeout | undefined;
  const pump = () => {
    try {
      while (!closed && !awaitingRetry && !waitingForAnswer && inFlight.length < BATCHES_IN_FLIGHT) {
        const wait = lastSent + MIN_SEND_INTERVAL_MS - performance.now();
        if (wait > 0) {
          paceTimer ??= setTimeout(() => ((paceTimer = undefined), pump()), wait);
          return;
        }
        const batch = nextBatch();
        if (!batch) return;
        lastSent = performance.now();
        inFlight.push(batch);
        void forward(batch);
      }
    } catch (err) {
      // Reading the backlog back from disk failed: tried again after a while.
      retryLater(`the queue: ${(err as Error).message}`);
    }
  };
  const forward = async (batch: Batch) => {
    try {
      await queue.sending(batch.messages);
      const outcome: SyncOutcome = await pont.sync(batch).catch((err: Error) => ({ retry: true as const, reason: err.message }));
      if ('retry' in outcome) return retryLater(outcome.reason, outcome.afterSeconds);
      if (outcome.refusedWhole && batch.messages.length > 1) splitUp(batch, outcome.problems);
      else await settled(batch, outcome.problems);
    } catch (err) {
      // The queue's files (sent.log): the batch is sent again, as it was, once they take writes.
      retryLater(`the queue: ${(err as Error).message}`);
    } finally {
      inFlight.splice(inFlight.indexOf(batch), 1);
      waitingForAnswer = false;
    }
    pump();
  };
  /** A batch Pont refused whole: its messages go again, each alone (`alone`), so that only what Pont refuses is refused. */
  const splitUp = (batch: Batch, problems: Problem[]) => {
    log('warn', 'Pont refused a batch whole; its messages go again one at a time', { control_ids: batch.messages.map((m) => m.id), error: problems[0]?.error });
    for (const m of batch.messages) alone.add(m.id);
    queue.retract(batch.messages);
  };
  /** Pont answered for each resource of the batch: its messages leave the backlog, what it refused said. */
  const settled = async (batch: Batch, problems: Problem[]) => {
    // The backoff starts again when the oldest batch goes through, not one beside a batch Pont keeps refusing.
    if (queue.startsWith([batch.messages[0]!.id])) failures = 0;
    for (const problem of problems) log('error', 'Pont refused a resource of a message', problem);
    // What Pont holds now is known only when it took all of it; a merge changes what refers to the merged record.
    // Said before the confirmation is written: Pont has it, whatever the queue's files do.
    if (batch.resources.some(merges)) confirmed.clear();
    else if (problems.length) confirmed.forget(batch);
    else confirmed.remember(batch);
    await queue.confirm(batch.messages);
    for (const m of batch.messages) alone.delete(m.id);
    if (applicationAcks.size) {
      try {
        acknowledgeApplication(batch.messages, problems);
      } catch (err) {
        log('error', 'application acknowledgements not sent', { error: (err as Error).message });
      }
    }
  };
  /** `afterSeconds`: when Pont said to come back (a rate limit's Retry-After), else a backoff of at most 5 s. */
  const retryLater = (reason: string, afterSeconds?: number) => {
    if (closed) return;
    failures++;
    // At most 5 s: once Pont is back, the backlog is readable within seconds.
    const delay = afterSeconds !== undefined ? afterSeconds * 1000 : Math.min(5_000, 250 * 2 ** Math.min(failures, 5));
    log('warn', 'forwarding to Pont failed; retrying', { reason, backlog: queue.size, retry_in_ms: delay });
    clearTimeout(retryTimer);
    awaitingRetry = true;
    retryTimer = setTimeout(retryNow, delay);
  };
  const retryNow = () => {
    clearTimeout(retryTimer);
    awaitingRetry = false;
    pump();
  };

  // ---- answering each frame --------------------------------------------------------------------------------------
  const ack = (message: Hl7Message | undefined, code: AckCode, error?: V2Error, application = false) =>
    buildAck({ message, code, error, application, now: now(), controlId: `PONT${randomBytes(8).toString('hex').toUpperCase()}` });

  const handle = async (frame: Frame, later: Later): Promise<string | undefined> => {
    if (frame.kind === 'too-large') {
      const message = parseHead(frame.head);
      log('warn', 'message refused: too large', { bytes: frame.size, max_message_bytes: config.max_message_bytes, control_id: message && header(message).controlId });
      return ack(message, 'AR', { location: 'MSH', condition: ErrorCondition.internal, text: `the message is ${frame.size} bytes; this agent takes at most ${config.max_message_bytes} (max_message_bytes)` });
    }
    const text = decode(frame.bytes);
    if (!text.startsWith('MSH') || text.length < 9) {
      log('warn', 'frame without an MSH segment refused', { bytes: frame.bytes.length });
      return ack(undefined, 'AR', { location: 'MSH', condition: ErrorCondition.segmentSequence, text: 'the frame does not start with an MSH segment' });
    }
    const message = Hl7Message.parse(text);
    // Bytes that are not UTF-8 in a message that says it is (MSH-18 empty, ASCII or UTF-8): its text would be stored
    // wrong (U+FFFD where a letter was), so it is refused naming the field, as a character set the agent does not read is.
    if (v2Charset(message) === 'utf-8' && !isUtf8(frame.bytes)) {
      const location = fieldAt(text, text.indexOf('\uFFFD'));
      log('warn', 'message answered AE', { control_id: header(message).controlId, location, error: 'not UTF-8' });
      return ack(message, 'AE', { location, condition: ErrorCondition.dataType, text: `${location} holds bytes that are not UTF-8, which MSH-18 (empty: UTF-8) says the message is: name its character set in MSH-18 (8859/1, 8859/15) or send UTF-8` });
    }
    try {
      const { controlId } = header(message);
      const key = messageKey(message);
      // A resend of a message already accepted (its sender's control id): the same answer (once the first is on
      // disk), nothing queued again.
      const before = controlId ? queue.accepted(key) : undefined;
      if (before) {
        await before;
        if (wantsApplicationAck(message)) {
          // Still on its way: answered with the first copy; already in Pont: at once.
          if (queue.pending(key)) applicationAcks.get(key)?.push({ message, later }) ?? applicationAcks.set(key, [{ message, later }]);
          else {
            const text = ack(message, 'AA', undefined, true);
            if (text !== undefined) later(text);
          }
        }
        return ack(message, 'AA');
      }
      const translation = translate(message, maps.current(), text);
      if (!translation.ok) {
        log('warn', `message answered ${translation.ack}`, { control_id: controlId, location: translation.error.location, error: translation.error.text });
        return ack(message, translation.ack, translation.error);
      }
      const queued: QueuedMessage = { id: key, type: translation.type, received_at: now().toISOString(), resources: translation.resources };
      if (wantsApplicationAck(message)) applicationAcks.set(key, [{ message, later }]);
      try {
        await queue.accept(queued);
      } catch (err) {
        applicationAcks.delete(key);
        throw err;
      }
      pump();
      return ack(message, 'AA');
    } catch (err) {
      log('error', 'message not accepted', { error: (err as Error).message });
      return ack(message, 'AE', { location: 'MSH', condition: ErrorCondition.internal, text: 'the agent could not keep the message: send it again' });
    }
  };

  const server: Server = await startMllpServer(config.mllp_host, config.mllp_port, config.max_message_bytes, handle, (err) => log('warn', 'MLLP connection error', { error: err.message }));

  // ---- heartbeat (what `pont agents list` and the portal show) ---------------------------------------------------
  let heartbeatTimer: NodeJS.Timeout | undefined;
  const beat = async () => {
    let seconds: number | undefined;
    try {
      seconds = await pont.heartbeat(`pont-bridge-agent ${AGENT_VERSION} hl7v2; backlog ${queue.size}`);
      // Pont is back: what waited for it goes now.
      if (failures) {
        failures = 0;
        retryNow();
      }
    } catch (err) {
      log('warn', 'heartbeat failed', { error: (err as Error).message });
    }
    if (!closed) heartbeatTimer = setTimeout(() => void beat(), (seconds ?? options.heartbeatSeconds ?? 30) * 1000);
  };
  void beat();
  pump(); // the backlog a previous run left, in order

  const port = (server.address() as { port: number }).port;
  log('info', 'bridge agent listening', { mllp: `${config.mllp_host}:${port}`, pont_url: config.pont_url, backlog: queue.size, mappings_version: maps.version });
  return {
    port,
    backlog: () => queue.size,
    reloadMaps: () => maps.reload(),
    async close() {
      closed = true;
      clearTimeout(retryTimer);
      clearTimeout(paceTimer);
      clearTimeout(heartbeatTimer);
      await stopMllpServer(server);
      // The batches on their way are confirmed (or left for the next start) before the files close.
      while (inFlight.length) await new Promise((resolve) => setTimeout(resolve, 20));
      await queue.close();
    },
  };
}

/** What one Bridge sync request carries: its messages, their resources, and which message each resource came from. */
export interface Batch {
  messages: QueuedMessage[];
  resources: unknown[];
  /** Each resource's JSON, as batchOf made it to compare them: the request's body is made of these. */
  texts: string[];
  owners: string[];
  /** The resources' JSON, in bytes (at most MAX_BATCH_BYTES, but for a batch of one message). */
  bytes: number;
  /** Each resource (`Type/id`) with its content (JSON), and the stored resources its references name. */
  contents: Map<string, string>;
  references: Set<string>;
  /**
   * Sent with no other on its way: it merges records (Pont moves what refers to the record merged away, which the other
   * may be writing: src/bridge/sync.ts), or holds two versions of one resource (a result and its correction).
   */
  alone: boolean;
}

/**
 * Whether `batch` may be sent while `other` is on its way. Pont writes each in a transaction of its own, in either
 * order, so they must not depend on each other: neither goes alone, and a resource one writes is neither named by the
 * other's references nor written by it, unless both carry it unchanged from the content Pont last confirmed (the
 * patient of results for one patient: each finds it unchanged). Nor may both bring a patient new or changed: Pont
 * gives a match key (the demographics) to the first that commits.
 */
function canGoBeside(batch: Batch, other: Batch, confirmed: ConfirmedContent): boolean {
  if (batch.alone || other.alone) return false;
  const settled = (key: string, content: string | undefined) => content !== undefined && confirmed.get(key) === content;
  const bringsPatient = (b: Batch) => [...b.contents].some(([key, content]) => key.startsWith('Patient/') && !settled(key, content));
  if (bringsPatient(batch) && bringsPatient(other)) return false;
  for (const [key, content] of batch.contents) {
    const theirs = other.contents.get(key);
    if (theirs !== undefined && (theirs !== content || !settled(key, content))) return false;
    if (other.references.has(key) && !settled(key, content)) return false;
  }
  for (const key of batch.references) if (other.contents.has(key) && !settled(key, other.contents.get(key))) return false;
  return true;
}

/** The content of the resources Pont confirmed last, for the most recent `max` of them (a map in insertion order). */
class ConfirmedContent {
  private readonly contents = new Map<string, string>();
  constructor(private readonly max: number) {}

  get(key: string): string | undefined {
    return this.contents.get(key);
  }

  remember(batch: Batch): void {
    for (const [key, content] of batch.contents) {
      if (RESULT_TYPES.has(key.slice(0, key.indexOf('/')))) continue;
      this.contents.delete(key);
      this.contents.set(key, content);
    }
    for (const key of this.contents.keys()) {
      if (this.contents.size <= this.max) break;
      this.contents.delete(key);
    }
  }

  forget(batch: Batch): void {
    for (const key of batch.contents.keys()) this.contents.delete(key);
  }

  clear(): void {
    this.contents.clear();
  }
}

/** The stored resources (`Type/id`, as the maps read references: storedReference) the references in `value` name. */
function referencesIn(value: unknown, out: Set<string>): void {
  if (Array.isArray(value)) for (const item of value) referencesIn(item, out);
  else if (value && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const stored = key === 'reference' && typeof item === 'string' ? storedReference(item) : undefined;
      if (stored) out.add(stored);
      else referencesIn(item, out);
    }
  }
}

/**
 * The batch of these messages: as many as fit (at most MAX_BATCH_RESOURCES resources and MAX_BATCH_BYTES of their
 * JSON; a message is never split), or
 * all of them (`whole`: the batch a crash interrupted, sent again as it was). Each message's resources are all in it,
 * a resource an earlier message gave with the same content (the patient of every result) too: each message is a group
 * Pont writes whole or not at all (PontClient.sync), and one refused must not take another's patient with it; Pont
 * writes such a repeat once. A batch never holds two versions of one resource (a result and its
 * correction): the second starts the next batch, so each is written, in order, and Pont takes every batch in one
 * transaction. A message that repeats a resource with other content itself (two OBX of one code and no sub-id) goes
 * alone and as it is (Pont writes a batch with duplicates one item at a time). The same messages give the same batch.
 */
export function batchOf(candidates: QueuedMessage[], whole: boolean): Batch {
  const batch: Batch = { messages: [], resources: [], texts: [], owners: [], bytes: 0, contents: new Map(), references: new Set(), alone: false };
  const seen = batch.contents;
  for (const m of candidates) {
    const added = new Map<string, string>();
    /** The resources this message adds, each with its JSON. */
    const fresh: Array<{ resource: unknown; json: string }> = [];
    let conflict = false;
    for (const r of m.resources as Array<{ resourceType: string; id: string }>) {
      const key = `${r.resourceType}/${r.id}`;
      const json = JSON.stringify(r);
      const before = added.get(key) ?? seen.get(key);
      if (before !== undefined && before !== json) {
        conflict = true;
        break;
      }
      if (added.get(key) === json) continue; // repeated within the message: once
      added.set(key, json);
      fresh.push({ resource: r, json });
    }
    const bytes = fresh.reduce((n, { json }) => n + Buffer.byteLength(json), 0);
    if (!whole && batch.messages.length && (conflict || batch.resources.length + fresh.length > MAX_BATCH_RESOURCES || batch.bytes + bytes > MAX_BATCH_BYTES)) break;
    if (conflict) {
      // As it is: every resource of every message, in order.
      batch.messages.push(...candidates.slice(batch.messages.length, whole ? undefined : batch.messages.length + 1));
      batch.resources = batch.messages.flatMap((x) => x.resources);
      batch.texts = batch.resources.map((r) => JSON.stringify(r));
      batch.owners = batch.messages.flatMap((x) => x.resources.map(() => x.id));
      (batch.resources as Array<{ resourceType: string; id: string }>).forEach((r, i) => seen.set(`${r.resourceType}/${r.id}`, batch.texts[i]!));
      return withDependencies(batch, true);
    }
    batch.messages.push(m);
    batch.bytes += bytes;
    for (const { resource, json } of fresh) {
      batch.resources.push(resource);
      batch.texts.push(json);
      batch.owners.push(m.id);
    }
    for (const [key, json] of added) seen.set(key, json);
  }
  return withDependencies(batch, false);
}

/** The groups of a batch: each message's resources (consecutive, as batchOf put them), where it gives two or more. */
function groupsOf(owners: string[]): number[][] {
  const groups: number[][] = [];
  owners.forEach((owner, index) => (index > 0 && owners[index - 1] === owner ? groups.at(-1)!.push(index) : groups.push([index])));
  return groups.filter((group) => group.length > 1);
}

/** `batch` with the references its resources make, and whether it must go alone (it merges, or holds a resource twice). */
function withDependencies(batch: Batch, repeats: boolean): Batch {
  for (const r of batch.resources) referencesIn(r, batch.references);
  batch.alone = repeats || batch.resources.some(merges);
  return batch;
}

/** A Patient that `replaces` another (ADT^A40): Pont moves what refers to the record merged away. */
function merges(resource: unknown): boolean {
  const patient = resource as Patient;
  return patient.resourceType === 'Patient' && !!patient.link?.some((l) => l.type === 'replaces');
}

/**
 * UTF-8 unless MSH-18 names ISO 8859-1 or 8859-15 (v2Charset) and the bytes are not UTF-8 (a sender may name Latin-1
 * and send UTF-8).
 */
function decode(bytes: Buffer): string {
  let text = bytes.toString('utf8');
  if (text.includes('\uFFFD')) {
    const msh = text.slice(0, text.search(/[\r\n]/) >>> 0);
    const charset = msh.startsWith('MSH') ? v2Charset(msh.split(msh[3] ?? '|')[17] ?? '') : undefined;
    if (charset && charset !== 'utf-8') text = new TextDecoder(charset).decode(bytes);
  }
  return text.replace(/^[\r\n\s]+/, '').replace(/[\r\n]+$/, '');
}

/** The MSH of a frame's start (a frame too large to keep), to answer in its encoding and version. */
function parseHead(head: Buffer): Hl7Message | undefined {
  const text = decode(head);
  if (!text.startsWith('MSH') || text.length < 9) return undefined;
  return Hl7Message.parse(text.split(/[\r\n]/)[0]!);
}

/** What Pont refused of a batch: a resource of one message, or the whole batch. */
type Problem = Record<string, unknown> & { control_id?: string; control_ids?: string[] };
type SyncOutcome = { problems: Problem[]; refusedWhole?: boolean } | { retry: true; reason: string; afterSeconds?: number };

/** Pont's Bridge API, with the agent's headers (docs/integrators.md "Bridge Agent protocol"). */
class PontClient {
  constructor(
    private readonly config: AgentConfig,
    private readonly now: () => Date,
  ) {}

  private headers(): Record<string, string> {
    return {
      'content-type': 'application/json',
      'x-bridge-agent-id': this.config.agent_id,
      'x-bridge-agent-key': this.config.agent_key,
      'x-bridge-timestamp': String(Math.floor(this.now().getTime() / 1000)),
    };
  }

  /** `body`: JSON text, sent as its UTF-8 bytes (a string body is re-checked character by character on its way). */
  private post(path: string, body: string): Promise<Response> {
    return fetch(new URL(path, this.config.pont_url), { method: 'POST', headers: this.headers(), body: Buffer.from(body), signal: AbortSignal.timeout(30_000) });
  }

  /** Whether Pont takes a batch's `groups`: until one answers that it does not (an older Pont: 422 naming the key). */
  private groupsTaken = true;

  /**
   * The batch under an id made of its messages' control ids: a resend after a lost answer gets the first answer. Each
   * message's resources are a group, written whole or not at all (batchOf puts all of them in).
   */
  async sync(batch: Batch): Promise<SyncOutcome> {
    const { messages, texts, owners } = batch;
    const batchId = `hl7-${createHash('sha256').update(messages.map((m) => m.id).join('\n')).digest('hex').slice(0, 40)}`;
    const groups = this.groupsTaken ? `,"groups":${JSON.stringify(groupsOf(owners))}` : '';
    // The resources' JSON as batchOf made it, not the batch made into JSON once more.
    const res = await this.post('/api/v1/bridge/sync', `{"batch_id":${JSON.stringify(batchId)},"resources":[${texts.join(',')}]${groups}}`);
    const body = (await res.json().catch(() => undefined)) as { results?: Array<Record<string, unknown>>; message?: string; details?: unknown } | undefined;
    if (res.status === 422 && groups && JSON.stringify(body?.details ?? '').includes('groups')) {
      this.groupsTaken = false;
      return this.sync(batch);
    }
    if (res.status === 200) {
      return { problems: (body?.results ?? []).filter((r) => r.status === 'failed').map((r) => ({ control_id: owners[r.index as number], resource_type: r.resource_type, source_id: r.source_id, error: r.error })) };
    }
    // Pont away, overloaded, or the key refused (fixed by an operator): try again later; nothing is dropped.
    if (res.status >= 500 || res.status === 401 || res.status === 403 || res.status === 408 || res.status === 429) {
      // A rate limit says when its window ends: sooner would only be refused again.
      const after = res.status === 429 ? Number(res.headers.get('retry-after')) : NaN;
      return { retry: true, reason: `${res.status} ${body?.message ?? ''}`.trim(), ...(after > 0 && after <= 3600 ? { afterSeconds: after } : {}) };
    }
    // Any other refusal of the whole batch would be refused again: said, and not retried forever.
    return { problems: [{ control_ids: messages.map((m) => m.id), status: res.status, error: body?.message ?? 'refused' }], refusedWhole: true };
  }

  /** The heartbeat; Pont's answer says how often to send it. */
  async heartbeat(version: string): Promise<number | undefined> {
    const res = await this.post('/api/v1/bridge/heartbeat', JSON.stringify({ agent_id: this.config.agent_id, facility_id: this.config.facility_id, version: version.slice(0, 64) }));
    if (res.status !== 200) throw new Error(`heartbeat answered ${res.status}`);
    const body = (await res.json()) as { config?: { heartbeat_interval_seconds?: number } };
    return body.config?.heartbeat_interval_seconds;
  }
}
