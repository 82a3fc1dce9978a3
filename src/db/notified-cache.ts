import type { Database } from './database';

/** Sets `key` in `map`, first dropping the oldest entry when `map` holds `capacity` already. */
export function setBounded<V>(map: Map<string, V>, key: string, value: V, capacity: number): void {
  if (!map.has(key) && map.size >= capacity) map.delete(map.keys().next().value!);
  map.set(key, value);
}

/** How long a key changed by this process stays uncached when its change is never announced (rolled back). */
const UNSETTLED_MS = 5000;

/**
 * A process's cache of rows whose changes a trigger announces on a channel (on every path: service, CLI, SQL by
 * hand), so a change reaches every process as soon as it commits. It is trusted only while the listening
 * connection is up: losing it empties the cache and stops caching until listening again (every lookup then reads
 * the table). A lookup that began before an invalidation must not fill it: take `since()` before reading the row
 * and give it to `set`.
 */
export class NotifiedCache<V> {
  private readonly entries = new Map<string, V>();
  /** key -> until when: changed in this process's open transaction, not cached until the change is heard. */
  private readonly unsettled = new Map<string, number>();
  private listening = false;
  /** Bumped by every invalidation. */
  private generation = 0;
  private stopListening?: () => Promise<void>;

  /** @param forgotten told of every invalidation (a key, or undefined for all), for what the owner keeps beside it. */
  constructor(
    private readonly capacity: number,
    private readonly forgotten: (key: string | undefined) => void = () => undefined,
  ) {}

  /** Starts listening on `channel` (each notification's payload is a key). Rejects when LISTEN fails: nothing is cached then. */
  async listen(db: Database, channel: string): Promise<void> {
    this.stopListening = await db.listen(channel, {
      notify: (key) => this.forget(key),
      ready: () => {
        this.forget();
        this.listening = true;
      },
      lost: () => {
        this.listening = false;
        this.forget();
      },
    });
  }

  async close(): Promise<void> {
    this.listening = false;
    await this.stopListening?.();
  }

  /** Forgets `key`, or everything when no key is given (an announcement: what this process was changing is settled). */
  forget(key?: string): void {
    this.generation++;
    if (key === undefined) {
      this.entries.clear();
      this.unsettled.clear();
    } else {
      this.entries.delete(key);
      this.unsettled.delete(key);
    }
    this.forgotten(key);
  }

  /**
   * Called in a transaction that changes `key`'s row, before it commits: it is forgotten and not cached again
   * until this process hears the change announced (the answer may reach the caller before the announcement
   * reaches us, and its very next request must read the new row), or UNSETTLED_MS have passed.
   */
  changing(key: string): void {
    this.forget(key);
    this.unsettled.set(key, Date.now() + UNSETTLED_MS);
  }

  /** Whether a trusted entry exists for `key` (its value may be null: "no such row"). */
  has(key: string): boolean {
    return this.listening && this.entries.has(key);
  }

  get(key: string): V | undefined {
    return this.has(key) ? this.entries.get(key) : undefined;
  }

  /** Marks the start of a lookup, for `set` and `fresh`. */
  since(): number {
    return this.generation;
  }

  /**
   * Whether what a lookup of `key` that began at `since` read may be cached: listening, nothing invalidated since,
   * and the key not being changed by this process (`changing`).
   */
  fresh(key: string, since: number): boolean {
    if (!this.listening || since !== this.generation) return false;
    const until = this.unsettled.get(key);
    if (until === undefined) return true;
    if (until > Date.now()) return false;
    this.unsettled.delete(key);
    return true;
  }

  set(key: string, value: V, since: number): void {
    if (this.fresh(key, since)) setBounded(this.entries, key, value, this.capacity);
  }
}
