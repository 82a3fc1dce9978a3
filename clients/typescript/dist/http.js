import { randomUUID } from 'node:crypto';
import { AuthenticationError, errorFor, RateLimitError, ServerError, ServiceError } from './errors.js';
/** Seconds before expiry at which the token is refreshed (interface §8). */
export const REFRESH_BEFORE_SECONDS = 60;
/** The HTTP side: the token (fetched, cached, refreshed once at a time), retries, and the error mapping. */
export class Transport {
    options;
    token;
    refreshing;
    fetchImpl;
    clientSecret;
    constructor(options) {
        this.options = options;
        this.fetchImpl = options.fetch ?? fetch;
        this.clientSecret = options.clientSecret;
    }
    get clientId() {
        return this.options.clientId;
    }
    /** After a rotation of the client's secret: later tokens are asked for with the new one. */
    useClientSecret(secret) {
        this.clientSecret = secret;
    }
    /** A valid token: the cached one, or a new one (concurrent callers share one refresh). */
    async accessToken(force = false) {
        if (!force && this.token && Date.now() / 1000 < this.token.expiresAt - REFRESH_BEFORE_SECONDS)
            return this.token.value;
        this.refreshing ??= this.fetchToken().finally(() => (this.refreshing = undefined));
        return this.refreshing;
    }
    async fetchToken() {
        const body = await this.send('POST', `${this.options.baseUrl}/api/v1/connect/auth/token`, {
            body: { grant_type: 'client_credentials', client_id: this.options.clientId, client_secret: this.clientSecret },
            auth: false,
        });
        const token = body;
        if (!token.access_token)
            throw new AuthenticationError('The token endpoint answered without an access_token');
        this.token = { value: token.access_token, expiresAt: Date.now() / 1000 + (token.expires_in ?? 3600) };
        return token.access_token;
    }
    async request(method, path, options = {}) {
        let url = options.url ?? `${this.options.baseUrl}${path}`;
        if (!options.url && options.query) {
            const q = new URLSearchParams();
            for (const [k, v] of Object.entries(options.query))
                if (v !== undefined && v !== null)
                    q.append(k, String(v));
            const text = q.toString();
            if (text)
                url += `?${text}`;
        }
        const idempotencyKey = options.idempotent ? randomUUID() : undefined;
        return (await this.send(method, url, { body: options.body, idempotencyKey, auth: true }));
    }
    async send(method, url, options) {
        const maxRetries = this.options.maxRetries ?? 3;
        let refreshedOn401 = false;
        for (let attempt = 0;; attempt++) {
            const headers = { accept: 'application/json' };
            if (options.body !== undefined)
                headers['content-type'] = 'application/json';
            if (options.idempotencyKey)
                headers['idempotency-key'] = options.idempotencyKey;
            if (options.auth)
                headers.authorization = `Bearer ${await this.accessToken()}`;
            let res;
            try {
                res = await this.fetchImpl(url, {
                    method,
                    headers,
                    body: options.body === undefined ? undefined : JSON.stringify(options.body),
                    signal: AbortSignal.timeout(this.options.timeoutMs ?? 30_000),
                });
            }
            catch (err) {
                if (attempt < maxRetries) {
                    await this.backoff(attempt);
                    continue;
                }
                throw new ServerError(`${method} ${new URL(url).pathname}: no answer (${err.name}) after ${attempt + 1} attempts`);
            }
            const text = await res.text();
            let body = text;
            try {
                body = text ? JSON.parse(text) : null;
            }
            catch {
                /* not JSON: errorFor says so */
            }
            if (res.ok) {
                if (typeof body === 'string' && text)
                    throw new ServerError(`HTTP ${res.status}: the answer is not JSON`, { status: res.status, requestId: res.headers.get('x-request-id') });
                return body;
            }
            const error = errorFor(res.status, body, res.headers);
            // An expired or revoked token: one new token, one more try.
            if (res.status === 401 && options.auth && !refreshedOn401) {
                refreshedOn401 = true;
                await this.accessToken(true);
                continue;
            }
            const retryable = res.status === 429 || res.status >= 500;
            if (retryable && attempt < maxRetries) {
                await this.backoff(attempt, error instanceof RateLimitError ? error.retryAfter : null);
                continue;
            }
            throw error instanceof ServiceError ? error : new ServerError(String(error));
        }
    }
    backoff(attempt, retryAfter = null) {
        const base = this.options.backoffMs ?? 500;
        const ms = retryAfter !== null ? retryAfter * 1000 : base * 2 ** attempt * (0.5 + Math.random());
        return new Promise((resolve) => setTimeout(resolve, ms));
    }
}
