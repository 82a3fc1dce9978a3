import pg from 'pg';
import { checkChannel, type ListenHandlers } from './database';

/** Wait before opening a lost listening connection again. */
const RECONNECT_MS = 1000;
/** How the listening connection shows in pg_stat_activity. */
export const LISTENER_APPLICATION_NAME = 'pont listener';

/**
 * One PostgreSQL connection that LISTENs on every channel this process cares about, opened on first use and
 * again after it drops (handlers are told lost() at once, ready() once it listens again).
 */
export class PgListener {
  private readonly channels = new Map<string, Set<ListenHandlers>>();
  private client?: pg.Client;
  private connecting?: Promise<void>;
  private closed = false;
  private retry?: NodeJS.Timeout;
  /** The listening connection's statements, one after another (pg warns of, and pg@9 refuses, a query sent during another). */
  private queue: Promise<unknown> = Promise.resolve();

  constructor(private readonly connectionString: string) {}

  private send(client: pg.Client, text: string): Promise<unknown> {
    const sent = this.queue.then(() => client.query(text));
    this.queue = sent.catch(() => undefined);
    return sent;
  }

  async listen(channel: string, handlers: ListenHandlers): Promise<() => Promise<void>> {
    checkChannel(channel);
    let set = this.channels.get(channel);
    const isNew = !set;
    if (!set) this.channels.set(channel, (set = new Set()));
    set.add(handlers);
    // `client` is set only once the opening connection LISTENs on every channel known then: from that moment a new
    // channel must be sent its own LISTEN, even while `connecting` is not yet cleared (it is, a step later; a channel
    // added in that step was neither in the opening's LISTENs nor sent one, and heard nothing).
    if (this.client) {
      if (isNew) await this.send(this.client, `LISTEN ${channel}`).catch(() => undefined); // a failure drops the connection: 'end' handles it
      handlers.ready?.();
    } else await this.connect();
    return async () => {
      set.delete(handlers);
      if (set.size) return;
      this.channels.delete(channel);
      if (this.client) await this.send(this.client, `UNLISTEN ${channel}`).catch(() => undefined);
    };
  }

  /**
   * A round trip on the listening connection. PostgreSQL signals listening sessions as a notifying
   * transaction commits, and a session sends the notifications it has pending before it answers a query;
   * so once this resolves, every notification committed before the call has reached the handlers.
   */
  async caughtUp(): Promise<void> {
    await this.connecting;
    const client = this.client;
    // A failed round trip is a lost connection, even before its 'end' arrives: pg_terminate_backend's FATAL
    // rejects the query first, and a caller told "caught up" must not meet a cache that still trusts itself.
    if (client) await this.send(client, 'SELECT 1').catch(() => this.lose(client));
  }

  private connect(): Promise<void> {
    this.connecting ??= (async () => {
      const client = new pg.Client({ connectionString: this.connectionString, application_name: LISTENER_APPLICATION_NAME });
      client.on('notification', (n) => {
        for (const h of this.channels.get(n.channel) ?? []) h.notify(n.payload ?? '');
      });
      client.on('error', () => undefined); // followed by 'end'
      client.on('end', () => this.lose(client));
      try {
        await client.connect();
        for (const channel of this.channels.keys()) await this.send(client, `LISTEN ${channel}`);
        this.client = client;
        for (const h of this.handlers()) h.ready?.();
      } catch {
        await client.end().catch(() => undefined);
        this.scheduleReconnect();
      }
    })().finally(() => (this.connecting = undefined));
    return this.connecting;
  }

  /** The listening connection `client` is gone (once per connection): handlers are told, and it is opened again. */
  private lose(client: pg.Client): void {
    if (this.client !== client) return;
    this.client = undefined;
    for (const h of this.handlers()) h.lost?.();
    void client.end().catch(() => undefined);
    this.scheduleReconnect();
  }

  private scheduleReconnect(): void {
    if (this.closed || this.retry) return;
    this.retry = setTimeout(() => {
      this.retry = undefined;
      if (!this.closed) void this.connect();
    }, RECONNECT_MS);
    this.retry.unref();
  }

  private *handlers(): Iterable<ListenHandlers> {
    for (const set of this.channels.values()) yield* set;
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.retry);
    await this.connecting;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}
