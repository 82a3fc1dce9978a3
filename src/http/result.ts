/** What a route handler answers (src/http/routes.ts); also what an idempotent request stores and replays (idempotency.ts). */
export interface HandlerResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Defaults to application/json. */
  contentType?: string;
  /**
   * What must be done before the answer is sent, under way while its body is serialised (the audit record of what a
   * records answer shows, with its consent checks): the answer waits for it, and is not sent if it fails. Never stored
   * with an idempotent answer.
   */
  settles?: Promise<void>;
}
