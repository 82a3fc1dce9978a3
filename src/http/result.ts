/** What a route handler answers (src/http/routes.ts); also what an idempotent request stores and replays (idempotency.ts). */
export interface HandlerResult {
  status?: number;
  body?: unknown;
  headers?: Record<string, string>;
  /** Defaults to application/json. */
  contentType?: string;
}
