/**
 * At most `limit` tasks run at once; the others wait their turn, in the order they came, holding nothing. For work
 * whose memory grows with how many run together rather than with how fast each goes (a records answer holds its
 * patient's pages until it is built: on the embedded database, whose one connection serves statements in turn, 32
 * requests at once each held theirs while waiting for their next statement).
 */
export class Turns {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly limit: number) {
    if (!(limit >= 1)) throw new Error(`Turns: limit must be at least 1 (${limit})`);
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    if (this.running >= this.limit) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await task();
    } finally {
      // The turn passes to the next in line (running stays the same), or is given back.
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }

  /** Tasks running, and waiting for their turn (for tests and metrics). */
  get counts(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }
}
