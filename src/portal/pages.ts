import type { Context } from 'koa';
import Router from '@koa/router';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import type { PortalPrincipal } from '../core/principal';
import { SCOPES, SCOPE_RISK } from '../core/scopes';
import { EVENT_TYPES } from '../events/types';
import type { FhirRepository } from '../fhir/repository';
import { readRawBody, mediaType } from '../http/body';
import { decodeUtf8, formFields } from '../core/body-text';
import { ApiError } from '../core/errors';
import type { Services } from '../http/services';
import { MIN_PASSWORD_LENGTH, sameToken, SignInRefused, type PortalRole, type PortalSession } from '../auth/portal-accounts';
import { ActivityFilter, FieldProblem, Invitation, keyRotationOf, NewAgent, NewClient, NewSubscription, Overlap, OVERLAPS, portalActions, Since } from './actions';
import type { ClientRecord } from '../auth/clients';
import { PORTAL_CSS, PORTAL_JS } from './assets';
import { activityCsv } from './csv';
import { html, type Html } from './html';
import { authorizeSession, clearSessionCookie, CSRF_FIELD, portalPrincipal, secureCookies, sessionIdOf, setSessionCookie } from '../auth/portal-session';

export const PORTAL = '/portal';
/** The strict policy of every portal page: our own style sheet and script only, forms to us only, never framed. */
const PORTAL_CSP = "default-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'";
const FORM_LIMIT = 64 * 1024;
/** Double-submit cookie of the sign-in form (there is no session yet to bind a token to). */
const SIGN_IN_COOKIE = 'service_sign_in';

type Errors = Record<string, string>;
type Values = Record<string, string | string[]>;
interface Page {
  title: string;
  body: Html;
  status?: number;
}

/** A `next` to return to after signing in: a portal page of ours only (never `//host`, `/\host` or another site). */
export function safeNext(next: string | undefined | null): string {
  if (!next || next.length > 500) return PORTAL;
  return /^\/portal(?:[/?#]|$)/.test(next) && !/[\\\s]/.test(next) && !next.startsWith('//') ? next : PORTAL;
}

/** A form body as repeated fields (checkbox groups); anything but a form is refused. */
async function readForm(ctx: Context): Promise<URLSearchParams> {
  if (mediaType(ctx) !== 'application/x-www-form-urlencoded') throw new ApiError(415, 'UNSUPPORTED_MEDIA_TYPE', 'Send the form (application/x-www-form-urlencoded)');
  return new URLSearchParams(formFields(decodeUtf8(await readRawBody(ctx, FORM_LIMIT))));
}

const one = (form: URLSearchParams, name: string) => form.get(name) ?? '';

/** Zod problems as field -> message, for the form that sent them. */
function fieldErrors(err: z.ZodError): Errors {
  const errors: Errors = {};
  for (const issue of err.issues) errors[String(issue.path[0] ?? 'form')] ??= issue.message;
  return errors;
}

function field(name: string, label: string, options: { type?: string; values: Values; errors: Errors; hint?: string; required?: boolean; autocomplete?: string }): Html {
  const error = options.errors[name];
  const value = options.type === 'password' ? '' : ((options.values[name] as string | undefined) ?? ''); // a secret is never sent back
  const described = [error && `${name}-error`, options.hint && `${name}-hint`].filter(Boolean).join(' ');
  return html`<label for="${name}">${label}</label>
    ${options.hint && html`<p class="muted" id="${name}-hint">${options.hint}</p>`}
    ${error && html`<p class="error" id="${name}-error">${error}</p>`}
    <input id="${name}" name="${name}" type="${options.type ?? 'text'}" value="${value}" ${options.required ? html`required` : ''}
      ${options.autocomplete ? html`autocomplete="${options.autocomplete}"` : ''} ${error ? html`aria-invalid="true"` : ''} ${described ? html`aria-describedby="${described}"` : ''}>`;
}

function formError(errors: Errors): Html | '' {
  return errors.form ? html`<p class="alert" role="alert">${errors.form}</p>` : '';
}

/** The backlog an agent reports in its heartbeat's version (the HL7 v2 agent's `…; backlog N`, docs/hl7-v2.md). */
const backlogOf = (version: string | null) => {
  const m = version ? /; backlog (\d+)$/.exec(version) : null;
  return m ? Number(m[1]) : undefined;
};
const when = (iso: string | null | undefined) => (iso ? iso.replace('T', ' ').replace(/\.\d+Z$/, ' UTC').replace(/Z$/, ' UTC') : '—');

const NOTICES: Record<string, string> = {
  revoked: 'Revoked.',
  unsubscribed: 'Unsubscribed.',
  'test-sent': 'Test event sent: it appears under Deliveries in a moment.',
  replayed: 'Replay queued: the delivery is attempted again now.',
  'password-set': 'Password set. Sign in with it.',
  'signed-out': 'Signed out.',
};

export function portalPages(services: Services): Router {
  const { access, config } = services;
  const actions = portalActions(services);
  const router = new Router({ prefix: PORTAL });

  const send = (ctx: Context, page: Page, session?: PortalSession) => {
    ctx.status = page.status ?? 200;
    ctx.type = 'text/html; charset=utf-8';
    ctx.body = layout(ctx, page, session).text;
  };

  function layout(ctx: Context, page: Page, session?: PortalSession): Html {
    const nav: Array<[string, string, PortalRole]> = [
      ['', 'Overview', 'viewer'],
      ['/clients', 'Clients', 'viewer'],
      ['/webhooks', 'Webhooks', 'viewer'],
      ['/webhooks/deliveries', 'Deliveries', 'viewer'],
      ['/agents', 'Bridge agents', 'viewer'],
      ['/activity', 'Activity', 'viewer'],
      ['/consents', 'Consents', 'viewer'],
      ['/users', 'Users', 'admin'],
    ];
    const notice = NOTICES[String(ctx.query.done ?? '')];
    return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>${page.title} · Pont developer portal</title><link rel="stylesheet" href="${PORTAL}/assets/portal.css"></head>
<body><a class="skip" href="#main">Skip to content</a>
<header><strong>Pont developer portal</strong>
${
  session &&
  html`<nav aria-label="Portal"><ul>${nav
    .filter(([, , role]) => role !== 'admin' || session.user.role === 'admin')
    .map(([path, label]) => html`<li><a href="${PORTAL}${path}" ${ctx.path === `${PORTAL}${path}` || (path === '' && ctx.path === `${PORTAL}/`) ? html`aria-current="page"` : ''}>${label}</a></li>`)}</ul></nav>
  <div class="who">${session.user.email} (${session.user.role}, ${session.user.organization_id})
  <form class="inline" method="post" action="${PORTAL}/sign-out"><input type="hidden" name="${CSRF_FIELD}" value="${session.csrfToken}"><button class="secondary" type="submit">Sign out</button></form></div>`
}
</header>
<main id="main"><h1>${page.title}</h1>${notice && html`<p class="notice" role="status">${notice}</p>`}${page.body}</main>
<script src="${PORTAL}/assets/portal.js"></script></body></html>`;
  }

  const csrf = (s: PortalSession) => html`<input type="hidden" name="${CSRF_FIELD}" value="${s.csrfToken}">`;
  const mayChange = (s: PortalSession) => s.user.role !== 'viewer';

  const repositoryOf = (ctx: Context, me: PortalPrincipal, operation: string): FhirRepository =>
    services.fhir.repository({ principal: me, channel: 'connect', requestId: ctx.state.requestId as string | undefined, address: ctx.ip, operation });

  interface Signed {
    ctx: Context;
    session: PortalSession;
    me: PortalPrincipal;
    repo: FhirRepository;
    form: URLSearchParams;
  }

  /**
   * A page behind sign-in: the session (else to sign-in and back), the CSRF token of a form (else 403), the role
   * (else 403), the rate limit; errors become pages, never a stack trace.
   */
  function signed(operation: string, needed: PortalRole | undefined, handler: (s: Signed) => Promise<Page | string | void>) {
    return async (ctx: Context) => {
      ctx.set('Content-Security-Policy', PORTAL_CSP);
      ctx.set('Cache-Control', 'no-store');
      let session: PortalSession | undefined;
      try {
        const form = ctx.method === 'POST' ? await readForm(ctx) : new URLSearchParams();
        session = await authorizeSession(ctx, access.portal, config, { needed, csrf: form.get(CSRF_FIELD) ?? '' });
        await access.limits.consume('portal', `portal:${session.user.id}`);
        const me = portalPrincipal(session);
        const result = await handler({ ctx, session, me, repo: repositoryOf(ctx, me, operation), form });
        if (typeof result === 'string') return ctx.redirect(result); // POST-redirect-GET
        if (result) send(ctx, result, session);
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) {
          // Back to this page after signing in (a form's page for a POST).
          const back = ctx.method === 'GET' ? ctx.originalUrl : safeNext(URL.parse(ctx.get('referer'))?.pathname);
          return ctx.redirect(`${PORTAL}/sign-in?next=${encodeURIComponent(safeNext(back))}`);
        }
        const refused = (status: number, message: string) =>
          send(ctx, { title: status === 404 ? 'Not found' : 'Refused', status, body: html`<p class="alert" role="alert">${message}</p><p><a href="${PORTAL}">Back to the overview</a></p>` }, session);
        if (err instanceof ApiError) return refused(err.status, err.message);
        // A value no form of ours sends (a hand-made request): refused, never a 500.
        if (err instanceof z.ZodError) return refused(422, fieldErrors(err)[String(err.issues[0]?.path[0] ?? 'form')] ?? 'Invalid input');
        throw err;
      }
    };
  }

  /** Runs a form's action; its problems come back as field errors (the form is shown again with what was typed). */
  async function attempt<T>(work: () => Promise<T>): Promise<{ ok: T } | { errors: Errors }> {
    try {
      return { ok: await work() };
    } catch (err) {
      if (err instanceof z.ZodError) return { errors: fieldErrors(err) };
      if (err instanceof FieldProblem) return { errors: { [err.field]: err.message.slice(err.field.length + 2) } };
      if (err instanceof ApiError && (err.status === 409 || err.status === 422)) return { errors: { form: err.message } };
      throw err;
    }
  }

  /** The page that shows a secret, once (answered to the POST itself, so the secret is never stored anywhere). */
  const secretPage = (title: string, label: string, secret: string, facts: Html, back: string): Page => ({
    title,
    body: html`<section><p class="alert" role="alert"><strong>Copy the ${label} now: it is shown this once.</strong> Pont keeps only a hash (or an encrypted copy) and cannot show it again.</p>
      ${facts}
      <p><strong>${label}</strong></p><p class="secret" id="secret">${secret}</p>
      <p><button type="button" class="secondary" data-copy="secret" hidden>Copy</button></p>
      <p><a class="button" href="${back}">Done</a></p></section>`,
  });

  const overlapSelect = (id: string) => html`<label for="${id}">Old secret stays valid</label>
    <select id="${id}" name="overlap"><option value="now">Not at all (now)</option><option value="1h">1 hour</option><option value="24h" selected>24 hours</option><option value="7d">7 days</option></select>`;

  // ---------------------------------------------------------------- assets
  router.get('/assets/portal.css', (ctx) => {
    ctx.type = 'text/css; charset=utf-8';
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.body = PORTAL_CSS;
  });
  router.get('/assets/portal.js', (ctx) => {
    ctx.type = 'text/javascript; charset=utf-8';
    ctx.set('Cache-Control', 'public, max-age=300');
    ctx.body = PORTAL_JS;
  });

  // ---------------------------------------------------------------- sign-in, set-password, sign-out
  const signInPage = (ctx: Context, values: Values, errors: Errors, status = 200): Page => {
    const token = randomBytes(24).toString('base64url');
    ctx.cookies.secure = true; // behind the operator's TLS proxy the hop may be plain HTTP
    ctx.cookies.set(SIGN_IN_COOKIE, token, { httpOnly: true, sameSite: 'strict', secure: secureCookies(config), path: `${PORTAL}/sign-in`, overwrite: true });
    return {
      title: 'Sign in',
      status,
      body: html`<section><form method="post" action="${PORTAL}/sign-in" novalidate>${formError(errors)}
        <input type="hidden" name="${CSRF_FIELD}" value="${token}"><input type="hidden" name="next" value="${safeNext(values.next as string)}">
        ${field('email', 'E-mail', { type: 'email', values, errors, required: true, autocomplete: 'username' })}
        ${field('password', 'Password', { type: 'password', values, errors, required: true, autocomplete: 'current-password' })}
        <p><button type="submit">Sign in</button></p></form></section>`,
    };
  };
  const plain = (ctx: Context, page: Page) => {
    ctx.set('Content-Security-Policy', PORTAL_CSP);
    ctx.set('Cache-Control', 'no-store');
    send(ctx, page);
  };

  router.get('/sign-in', async (ctx) => plain(ctx, signInPage(ctx, { next: String(ctx.query.next ?? '') }, {})));
  router.post('/sign-in', async (ctx) => {
    const form = await readForm(ctx);
    const values = { email: one(form, 'email'), next: one(form, 'next') };
    if (!sameToken(one(form, CSRF_FIELD), ctx.cookies.get(SIGN_IN_COOKIE) ?? '')) {
      return plain(ctx, signInPage(ctx, values, { form: 'The form had expired: sign in again.' }, 403));
    }
    try {
      const { sessionId } = await access.portal.signIn(values.email, one(form, 'password'), ctx.ip);
      await access.portal.signOut(sessionIdOf(ctx, config)); // the session the browser carried (if any) ends: a new id
      setSessionCookie(ctx, config, sessionId);
      ctx.cookies.set(SIGN_IN_COOKIE, '', { path: `${PORTAL}/sign-in`, expires: new Date(0) });
      ctx.redirect(safeNext(values.next));
    } catch (err) {
      if (!(err instanceof SignInRefused)) throw err;
      const message = err.retryAfterSeconds
        ? `Too many failed sign-ins. Try again in ${Math.ceil(err.retryAfterSeconds / 60)} minutes.`
        : 'Wrong e-mail or password.';
      plain(ctx, signInPage(ctx, values, { form: message }, err.retryAfterSeconds ? 429 : 401));
    }
  });

  const setPasswordPage = (token: string, email: string, errors: Errors, status = 200): Page => ({
    title: 'Set your password',
    status,
    body: html`<section><form method="post" action="${PORTAL}/set-password" novalidate>${formError(errors)}
      <p>For <strong>${email}</strong>.</p><input type="hidden" name="token" value="${token}">
      ${field('password', 'New password', { type: 'password', values: {}, errors, required: true, autocomplete: 'new-password', hint: `At least ${MIN_PASSWORD_LENGTH} characters.` })}
      ${field('confirm', 'The same password again', { type: 'password', values: {}, errors, required: true, autocomplete: 'new-password' })}
      <p><button type="submit">Set password</button></p></form></section>`,
  });
  const linkUnusable: Page = {
    title: 'Link not valid',
    status: 410,
    body: html`<p class="alert" role="alert">This set-password link is unknown, used or older than 24 hours. Ask your organisation's admin (or Pont's operator) for a new one.</p>`,
  };
  router.get('/set-password', async (ctx) => {
    const token = String(ctx.query.token ?? '');
    const user = await access.portal.passwordLinkUser(token);
    plain(ctx, user ? setPasswordPage(token, user.email, {}) : linkUnusable);
  });
  router.post('/set-password', async (ctx) => {
    // The one-time token is what authorises the form (no session yet): a forged form needs it too.
    const form = await readForm(ctx);
    const token = one(form, 'token');
    const user = await access.portal.passwordLinkUser(token);
    const password = one(form, 'password');
    // An unusable link costs the same Argon2id hash as a good one (setPassword hashes first, then finds no token).
    if (!user) {
      await access.portal.setPassword(token, password.slice(0, 256));
      return plain(ctx, linkUnusable);
    }
    const errors: Errors = {};
    if (password.length < MIN_PASSWORD_LENGTH) errors.password = `Use at least ${MIN_PASSWORD_LENGTH} characters.`;
    else if (password.length > 256) errors.password = 'Use at most 256 characters.';
    else if (password !== one(form, 'confirm')) errors.confirm = 'The two passwords differ.';
    if (Object.keys(errors).length) return plain(ctx, setPasswordPage(token, user.email, errors, 422));
    if (!(await access.portal.setPassword(token, password))) return plain(ctx, linkUnusable);
    ctx.redirect(`${PORTAL}/sign-in?done=password-set`);
  });

  router.post('/sign-out', async (ctx) => {
    const form = await readForm(ctx);
    const session = await access.portal.session(sessionIdOf(ctx, config));
    if (session && !sameToken(one(form, CSRF_FIELD), session.csrfToken)) {
      return plain(ctx, { title: 'Refused', status: 403, body: html`<p class="alert" role="alert">Missing or wrong CSRF token.</p>` });
    }
    await access.portal.signOut(sessionIdOf(ctx, config));
    clearSessionCookie(ctx, config);
    ctx.redirect(`${PORTAL}/sign-in?done=signed-out`);
  });

  // ---------------------------------------------------------------- overview
  router.get(
    '/',
    signed('portalOverview', undefined, async ({ me }) => {
      const clients = (await actions.clients(me)).filter((c) => !c.revoked_at);
      const clientId = clients[0]?.client_id ?? 'YOUR_CLIENT_ID';
      const base = config.publicUrl;
      const limits = Object.entries(config.rateLimits).filter(([group]) => !group.startsWith('portal'));
      return {
        title: 'Overview',
        body: html`<section><h2>Your integration</h2><dl>
          <dt>Organisation</dt><dd><code>${me.organizationId}</code></dd>
          <dt>Base URL</dt><dd><code>${base}</code></dd>
          <dt>Discovery</dt><dd><a href="${base}/.well-known/oauth-authorization-server">/.well-known/oauth-authorization-server</a>, <a href="${base}/.well-known/jwks.json">/.well-known/jwks.json</a></dd>
          <dt>OpenAPI</dt><dd><a href="${base}/api/openapi.json">/api/openapi.json</a></dd></dl></section>
          <section><h2>Quick start</h2><p>Get a token with ${clients.length ? html`your client <code>${clientId}</code>` : html`a client (create one under <a href="${PORTAL}/clients">Clients</a>)`} and its secret, then call an operation:</p>
<pre id="quickstart">curl -s ${base}/api/v1/connect/auth/token -H 'content-type: application/json' \\
  -d '{"grant_type":"client_credentials","client_id":"${clientId}","client_secret":"'"$CLIENT_SECRET"'"}'
curl -s ${base}/api/v1/connect/patients/verify/HEALTH_ID -H "authorization: Bearer $ACCESS_TOKEN"</pre>
          <p><button type="button" class="secondary" data-copy="quickstart" hidden>Copy</button></p></section>
          <section><h2>Rate limits</h2><div class="table" tabindex="0" role="region" aria-label="Rate limits"><table><thead><tr><th scope="col">Group</th><th scope="col">Requests</th><th scope="col">Per</th></tr></thead>
          <tbody>${limits.map(([group, l]) => html`<tr><td>${group}</td><td>${l.points}</td><td>${l.seconds} s</td></tr>`)}</tbody></table></div>
          <p class="muted">Per client and group; 429 with Retry-After beyond them.</p></section>`,
      };
    }),
  );

  // ---------------------------------------------------------------- clients
  /** A client with a secret: its rotation form; a client registered with a key set has none, so how its keys are rotated. */
  const rotation = (s: Signed, c: ClientRecord) => {
    const keys = keyRotationOf(c);
    if (keys) return html`<p class="muted">No secret: registered with a key set. To rotate its keys, ${keys.how}.</p>`;
    return html`<form method="post" action="${PORTAL}/clients/${c.client_id}/rotate" class="row">${csrf(s.session)}${overlapSelect(`overlap-${c.client_id}`)}<button type="submit" class="secondary">Rotate secret of ${c.name}</button></form>`;
  };
  const clientsPage = async (s: Signed, values: Values = {}, errors: Errors = {}, status = 200): Promise<Page> => {
    const clients = await actions.clients(s.me);
    const chosen = new Set((values.scopes as string[] | undefined) ?? []);
    return {
      title: 'Clients',
      status,
      body: html`<div class="table" tabindex="0" role="region" aria-label="Clients"><table><caption class="muted">Integration clients of ${s.me.organizationId}</caption>
        <thead><tr><th scope="col">Name</th><th scope="col">Client id</th><th scope="col">Scopes</th><th scope="col">Last used</th><th scope="col">Status</th>${mayChange(s.session) && html`<th scope="col">Actions</th>`}</tr></thead>
        <tbody>${clients.map(
          (c) => html`<tr><td>${c.name}</td><td><code>${c.client_id}</code>${c.facility_id && html`<br><span class="muted">facility ${c.facility_id}</span>`}</td><td>${c.scopes.join(' ')}</td>
          <td>${when(c.last_used_at)}</td><td>${c.revoked_at ? `revoked ${when(c.revoked_at)}` : c.previous_secret_expires_at ? `active; old secret valid until ${when(c.previous_secret_expires_at)}` : 'active'}</td>
          ${mayChange(s.session) && html`<td>${!c.revoked_at && html`${rotation(s, c)}
            <form method="post" action="${PORTAL}/clients/${c.client_id}/revoke">${csrf(s.session)}<p><button type="submit" class="danger">Revoke ${c.name}</button></p></form>`}</td>`}</tr>`,
        )}${clients.length ? '' : html`<tr><td colspan="6">No clients yet.</td></tr>`}</tbody></table></div>
        ${
          mayChange(s.session) &&
          html`<section><h2>Create a client</h2><form method="post" action="${PORTAL}/clients" novalidate>${csrf(s.session)}${formError(errors)}
          ${field('name', 'Name', { values, errors, required: true, hint: 'What it is for, e.g. "Lab system".' })}
          ${field('facility_id', 'Facility (optional)', { values, errors, hint: 'Bind the client to one facility (needed to write its stock and payments).' })}
          <fieldset class="choices" ${errors.scopes ? html`aria-describedby="scopes-error"` : ''}><legend>Scopes</legend>${errors.scopes && html`<p class="error" id="scopes-error">${errors.scopes}</p>`}
          ${SCOPES.map((scope) => html`<label><input type="checkbox" name="scopes" value="${scope}" ${chosen.has(scope) ? html`checked` : ''}> <code>${scope}</code> <span class="risk-${SCOPE_RISK[scope]}">${SCOPE_RISK[scope]} risk</span></label>`)}</fieldset>
          <p><button type="submit">Create client</button></p></form></section>`
        }`,
    };
  };
  router.get('/clients', signed('portalListClients', undefined, (s) => clientsPage(s)));
  router.post(
    '/clients',
    signed('portalCreateClient', 'developer', async (s) => {
      const values = { name: one(s.form, 'name'), facility_id: one(s.form, 'facility_id'), scopes: s.form.getAll('scopes') };
      const done = await attempt(() => actions.createClient(s.me, s.repo, NewClient.parse(values)));
      if ('errors' in done) return clientsPage(s, values, done.errors, 422);
      const c = done.ok;
      return secretPage('Client created', 'client secret', c.client_secret, html`<p>Client <strong>${c.name}</strong>: client id <code id="client-id">${c.client_id}</code>, scopes ${c.scopes.join(' ')}.</p>`, `${PORTAL}/clients`);
    }),
  );
  router.post(
    '/clients/:id/rotate',
    signed('portalRotateClientSecret', 'developer', async (s) => {
      const overlap = Overlap.parse(one(s.form, 'overlap') || '24h');
      const r = await actions.rotateClient(s.me, s.repo, s.ctx.params.id!, OVERLAPS[overlap]);
      return secretPage('Client secret rotated', 'new client secret', r.client_secret, html`<p>Client <code>${r.client_id}</code>. The old secret ${r.previous_secret_expires_at ? html`stays valid until ${when(r.previous_secret_expires_at)}` : 'no longer works'}.</p>`, `${PORTAL}/clients`);
    }),
  );
  router.post(
    '/clients/:id/revoke',
    signed('portalRevokeClient', 'developer', async (s) => {
      await actions.revokeClient(s.me, s.ctx.params.id!);
      return `${PORTAL}/clients?done=revoked`;
    }),
  );

  // ---------------------------------------------------------------- webhooks
  const webhooksPage = async (s: Signed, values: Values = {}, errors: Errors = {}, status = 200): Promise<Page> => {
    const subscriptions = await actions.subscriptions(s.me);
    const chosen = new Set((values.subscribed_events as string[] | undefined) ?? []);
    return {
      title: 'Webhooks',
      status,
      body: html`<div class="table" tabindex="0" role="region" aria-label="Subscriptions"><table><caption class="muted">Active subscriptions</caption><thead><tr><th scope="col">Endpoint</th><th scope="col">Events</th><th scope="col">Created</th>${mayChange(s.session) && html`<th scope="col">Actions</th>`}</tr></thead>
        <tbody>${subscriptions.map(
          (w) => html`<tr><td><code>${w.callback_url}</code><br><span class="muted">${w.id}${w.description && ` · ${w.description}`}</span><br><a href="${PORTAL}/webhooks/deliveries?subscription_id=${w.id}">Deliveries</a></td><td>${w.subscribed_events.join(' ')}</td><td>${when(w.created_at)}</td>
          ${mayChange(s.session) && html`<td><form method="post" action="${PORTAL}/webhooks/${w.id}/test">${csrf(s.session)}<p><button type="submit" class="secondary">Send test event to ${w.callback_url}</button></p></form>
          <form method="post" action="${PORTAL}/webhooks/${w.id}/rotate" class="row">${csrf(s.session)}${overlapSelect(`overlap-${w.id}`)}<button type="submit" class="secondary">Rotate secret of ${w.callback_url}</button></form>
          <form method="post" action="${PORTAL}/webhooks/${w.id}/unsubscribe">${csrf(s.session)}<p><button type="submit" class="danger">Unsubscribe ${w.callback_url}</button></p></form></td>`}</tr>`,
        )}${subscriptions.length ? '' : html`<tr><td colspan="4">No subscriptions yet.</td></tr>`}</tbody></table></div>
        ${
          mayChange(s.session) &&
          html`<section><h2>Subscribe an endpoint</h2><form method="post" action="${PORTAL}/webhooks" novalidate>${csrf(s.session)}${formError(errors)}
          ${field('callback_url', 'Callback URL', { type: 'url', values, errors, required: true, hint: 'https:// (http:// to localhost only in development).' })}
          ${field('description', 'Description (optional)', { values, errors })}
          <fieldset class="choices" ${errors.subscribed_events ? html`aria-describedby="subscribed_events-error"` : ''}><legend>Events</legend>${errors.subscribed_events && html`<p class="error" id="subscribed_events-error">${errors.subscribed_events}</p>`}
          ${EVENT_TYPES.map((type) => html`<label><input type="checkbox" name="subscribed_events" value="${type}" ${chosen.has(type) ? html`checked` : ''}> <code>${type}</code></label>`)}</fieldset>
          <p><button type="submit">Subscribe</button></p></form></section>`
        }`,
    };
  };
  router.get('/webhooks', signed('portalListSubscriptions', undefined, (s) => webhooksPage(s)));
  router.post(
    '/webhooks',
    signed('portalSubscribe', 'developer', async (s) => {
      const values = { callback_url: one(s.form, 'callback_url'), description: one(s.form, 'description'), subscribed_events: s.form.getAll('subscribed_events') };
      const done = await attempt(() => actions.subscribe(s.me, s.repo, NewSubscription.parse(values)));
      if ('errors' in done) return webhooksPage(s, values, done.errors, 422);
      const w = done.ok;
      return secretPage('Endpoint subscribed', 'webhook secret', w.webhook_secret, html`<p>Subscription <code>${w.id}</code> to <code>${w.callback_url}</code>. Verify each delivery's X-Service-Signature with this secret.</p>`, `${PORTAL}/webhooks`);
    }),
  );
  router.post(
    '/webhooks/:id/rotate',
    signed('portalRotateWebhookSecret', 'developer', async (s) => {
      const overlap = Overlap.parse(one(s.form, 'overlap') || '24h');
      const w = await actions.rotateSubscription(s.me, s.repo, s.ctx.params.id!, OVERLAPS[overlap]);
      return secretPage('Webhook secret rotated', 'new webhook secret', w.webhook_secret, html`<p>Subscription <code>${w.id}</code>. Deliveries are ${w.previous_secret_expires_at ? html`signed with both secrets until ${when(w.previous_secret_expires_at)}` : 'signed with the new secret only'}.</p>`, `${PORTAL}/webhooks`);
    }),
  );
  router.post(
    '/webhooks/:id/unsubscribe',
    signed('portalUnsubscribe', 'developer', async (s) => {
      await actions.unsubscribe(s.me, s.ctx.params.id!);
      return `${PORTAL}/webhooks?done=unsubscribed`;
    }),
  );
  router.post(
    '/webhooks/:id/test',
    signed('portalSendTestEvent', 'developer', async (s) => {
      await actions.sendTestEvent(s.me, s.repo, s.ctx.params.id!);
      return `${PORTAL}/webhooks/deliveries?subscription_id=${encodeURIComponent(s.ctx.params.id!)}&done=test-sent`;
    }),
  );

  const DeliveryQuery = z.object({ status: z.enum(['pending', 'delivered', 'exhausted', 'cancelled']).optional().catch(undefined), subscription_id: z.string().max(200).optional().catch(undefined) });
  const deliveriesPage = async (s: Signed, errors: Errors = {}, status = 200): Promise<Page> => {
    const query = DeliveryQuery.parse(s.ctx.query);
    const cursor = typeof s.ctx.query.cursor === 'string' ? s.ctx.query.cursor : undefined;
    const page = await actions.deliveries(s.me, { status: query.status, subscriptionId: query.subscription_id, cursor: cursor && cursor.length <= 200 ? cursor : undefined });
    const statuses = ['', 'pending', 'delivered', 'exhausted', 'cancelled'];
    const next = page.next_cursor && `?${new URLSearchParams({ ...(query.status ? { status: query.status } : {}), ...(query.subscription_id ? { subscription_id: query.subscription_id } : {}), cursor: page.next_cursor })}`;
    return {
      title: 'Deliveries',
      status,
      body: html`<form method="get" action="${PORTAL}/webhooks/deliveries" class="row"><div><label for="status">Status</label><select id="status" name="status">${statuses.map((st) => html`<option value="${st}" ${st === (query.status ?? '') ? html`selected` : ''}>${st || 'any'}</option>`)}</select></div>
        ${query.subscription_id && html`<input type="hidden" name="subscription_id" value="${query.subscription_id}">`}<button type="submit" class="secondary">Filter</button></form>
        ${
          mayChange(s.session) &&
          html`<section><h2>Replay exhausted deliveries</h2><form method="post" action="${PORTAL}/webhooks/replay-exhausted" class="row" novalidate>${csrf(s.session)}
          <div>${field('since', 'Exhausted since (UTC)', { type: 'datetime-local', values: {}, errors, required: true })}</div><button type="submit">Replay all</button></form></section>`
        }
        ${page.deliveries.map(
          (d) => html`<section class="delivery" data-status="${d.status}"><h2>${d.event_type} <span class="muted">· ${d.status}</span></h2>
          <p>Event <code>${d.event_id}</code> to <code>${d.callback_url}</code> · round ${d.round}, ${d.attempts_made} attempt(s)${d.next_attempt_at && html`, next at ${when(d.next_attempt_at)}`}</p>
          ${mayChange(s.session) && !d.event_type.startsWith('fhir-subscription.') && html`<form method="post" action="${PORTAL}/webhooks/events/${d.event_id}/replay">${csrf(s.session)}<button type="submit" class="secondary">Replay event ${d.event_id}</button></form>`}
          <div class="table" tabindex="0" role="region" aria-label="Attempts of delivery ${d.id}"><table><thead><tr><th scope="col">Round.attempt</th><th scope="col">Time</th><th scope="col">Status</th><th scope="col">Duration</th><th scope="col">Error</th><th scope="col">Answer (first 1 KB)</th></tr></thead><tbody>
          ${d.attempts.map((a) => html`<tr><td>${a.round}.${a.attempt}</td><td>${when(a.started_at)}</td><td>${a.status_code ?? '—'} ${a.succeeded ? 'ok' : 'failed'}</td><td>${a.duration_ms} ms</td><td>${a.error ?? ''}</td><td><pre>${a.response_excerpt ?? ''}</pre></td></tr>`)}
          ${d.attempts.length ? '' : html`<tr><td colspan="6">No attempt yet.</td></tr>`}</tbody></table></div></section>`,
        )}${page.deliveries.length ? '' : html`<p>No deliveries${query.status ? html` with status ${query.status}` : ''}.</p>`}
        ${next && html`<p><a href="${PORTAL}/webhooks/deliveries${next}">Older deliveries</a></p>`}`,
    };
  };
  router.get('/webhooks/deliveries', signed('portalListDeliveries', undefined, (s) => deliveriesPage(s)));
  router.post(
    '/webhooks/events/:id/replay',
    signed('portalReplayEvent', 'developer', async (s) => {
      await actions.replay(s.me, s.repo, s.ctx.params.id!);
      return `${PORTAL}/webhooks/deliveries?done=replayed`;
    }),
  );
  router.post(
    '/webhooks/replay-exhausted',
    signed('portalReplayExhausted', 'developer', async (s) => {
      const since = Since.safeParse(one(s.form, 'since') + (/T\d\d:\d\d(:\d\d)?$/.test(one(s.form, 'since')) ? 'Z' : ''));
      if (!since.success) return deliveriesPage(s, { since: 'Give a date and time.' }, 422);
      await actions.replayExhausted(s.me, s.repo, new Date(since.data));
      return `${PORTAL}/webhooks/deliveries?done=replayed`;
    }),
  );

  // ---------------------------------------------------------------- bridge agents
  const agentsPage = async (s: Signed, values: Values = {}, errors: Errors = {}, status = 200): Promise<Page> => {
    const agents = await actions.agents(s.me);
    return {
      title: 'Bridge agents',
      status,
      body: html`${agents.map(
        (a) => html`<section><h2><code>${a.agent_id}</code> <span class="muted">· facility ${a.facility_id} · ${a.revoked_at ? `revoked ${when(a.revoked_at)}` : 'active'}</span></h2>
        <p>Last heartbeat: ${when(a.last_seen_at)} · version ${a.last_version ?? '—'} · clock skew ${a.clock_skew_seconds === null ? '—' : `${a.clock_skew_seconds > 0 ? '+' : ''}${a.clock_skew_seconds} s`}</p>
        ${backlogOf(a.last_version) !== undefined && html`<p>Backlog: ${backlogOf(a.last_version)!.toLocaleString('en')} messages acknowledged by the agent and not yet in Pont (at its last heartbeat)</p>`}
        <div class="table" tabindex="0" role="region" aria-label="Sync batches of ${a.agent_id}"><table><caption class="muted">Recent sync batches</caption><thead><tr><th scope="col">Batch</th><th scope="col">Time</th><th scope="col">Created / updated / unchanged / failed</th><th scope="col">Failures</th></tr></thead><tbody>
        ${a.recent_batches.map((b) => html`<tr><td><code>${b.batch_id}</code></td><td>${when(new Date(b.created_at).toISOString())}</td><td>${b.counts ? `${b.counts.created} / ${b.counts.updated} / ${b.counts.unchanged} / ${b.counts.failed}` : '—'}</td><td>${b.errors.join('; ')}</td></tr>`)}
        ${a.recent_batches.length ? '' : html`<tr><td colspan="4">No batches yet.</td></tr>`}</tbody></table></div>
        ${mayChange(s.session) && !a.revoked_at && html`<form method="post" action="${PORTAL}/agents/${a.agent_id}/revoke">${csrf(s.session)}<p><button type="submit" class="danger">Revoke ${a.agent_id}</button></p></form>`}</section>`,
      )}${agents.length ? '' : html`<p>No Bridge agents yet.</p>`}
      ${
        mayChange(s.session) &&
        html`<section><h2>Create an agent</h2><form method="post" action="${PORTAL}/agents" novalidate>${csrf(s.session)}${formError(errors)}
        ${field('facility_id', 'Facility', { values, errors, required: true, hint: 'The facility the agent runs at: letters, digits, . _ : -' })}
        <p><button type="submit">Create agent</button></p></form></section>`
      }`,
    };
  };
  router.get('/agents', signed('portalListAgents', undefined, (s) => agentsPage(s)));
  router.post(
    '/agents',
    signed('portalCreateAgent', 'developer', async (s) => {
      const values = { facility_id: one(s.form, 'facility_id') };
      const done = await attempt(() => actions.createAgent(s.me, s.repo, NewAgent.parse(values)));
      if ('errors' in done) return agentsPage(s, values, done.errors, 422);
      const a = done.ok;
      return secretPage('Agent created', 'agent key', a.agent_key, html`<p>Agent <code>${a.agent_id}</code> of facility <code>${a.facility_id}</code> (X-Bridge-Agent-ID).</p>`, `${PORTAL}/agents`);
    }),
  );
  router.post(
    '/agents/:id/revoke',
    signed('portalRevokeAgent', 'developer', async (s) => {
      await actions.revokeAgent(s.me, s.ctx.params.id!);
      return `${PORTAL}/agents?done=revoked`;
    }),
  );

  // ---------------------------------------------------------------- activity, consents
  const activityQuery = (ctx: Context) => {
    const raw = { health_id: String(ctx.query.health_id ?? ''), from: String(ctx.query.from ?? ''), to: String(ctx.query.to ?? '') };
    const parsed = ActivityFilter.safeParse(raw);
    return { raw, parsed };
  };
  router.get(
    '/activity',
    signed('portalActivity', undefined, async (s) => {
      const { raw, parsed } = activityQuery(s.ctx);
      const errors = parsed.success ? {} : fieldErrors(parsed.error);
      const rows = parsed.success ? await actions.activity(s.repo, parsed.data) : [];
      const csv = `${PORTAL}/activity.csv?${new URLSearchParams(raw)}`;
      return {
        title: 'Activity',
        status: parsed.success ? 200 : 422,
        body: html`<form method="get" action="${PORTAL}/activity" class="row" novalidate>
          <div>${field('health_id', 'Health ID', { values: raw, errors })}</div><div>${field('from', 'From', { type: 'date', values: raw, errors })}</div><div>${field('to', 'To', { type: 'date', values: raw, errors })}</div>
          <button type="submit" class="secondary">Filter</button></form><p><a href="${csv}">Download as CSV</a></p>
          <div class="table" tabindex="0" role="region" aria-label="Activity"><table><caption class="muted">Your organisation's accesses to patient data, newest first (at most 500)</caption>
          <thead><tr><th scope="col">When</th><th scope="col">Who</th><th scope="col">Health ID</th><th scope="col">What</th><th scope="col">Purpose</th><th scope="col">Break-glass</th></tr></thead>
          <tbody>${rows.map((r) => html`<tr><td>${when(r.at)}</td><td>${r.who}</td><td>${r.health_id ?? '—'}</td><td>${r.what} (${r.action})</td><td>${r.purpose ?? ''}</td><td>${r.break_glass ? 'yes' : 'no'}</td></tr>`)}
          ${rows.length ? '' : html`<tr><td colspan="6">No activity.</td></tr>`}</tbody></table></div>`,
      };
    }),
  );
  router.get(
    '/activity.csv',
    signed('portalActivity', undefined, async (s) => {
      const { parsed } = activityQuery(s.ctx);
      const rows = parsed.success ? await actions.activity(s.repo, parsed.data) : [];
      s.ctx.type = 'text/csv; charset=utf-8';
      s.ctx.set('Content-Disposition', 'attachment; filename="activity.csv"');
      s.ctx.body = activityCsv(rows);
    }),
  );
  router.get(
    '/consents',
    signed('portalConsentCounts', undefined, async (s) => {
      const counts = await actions.consentCounts(s.me, s.repo);
      return {
        title: 'Consents',
        body: html`<div class="table" tabindex="0" role="region" aria-label="Consent counts"><table><caption class="muted">Consents granted to ${s.me.organizationId}, by state, type and purpose of use (counts only; narrowed: naming kinds of record, a period of care or a frequency)</caption>
          <thead><tr><th scope="col">State</th><th scope="col">Type</th><th scope="col">Purpose</th><th scope="col">Count</th><th scope="col">Narrowed</th></tr></thead>
          <tbody>${counts.map((c) => html`<tr><td>${c.state}</td><td>${c.consent_type}</td><td>${c.purpose_of_use}</td><td>${c.count}</td><td>${c.narrowed}</td></tr>`)}${counts.length ? '' : html`<tr><td colspan="5">No consents yet.</td></tr>`}</tbody></table></div>`,
      };
    }),
  );

  // ---------------------------------------------------------------- users (admin)
  const usersPage = async (s: Signed, values: Values = {}, errors: Errors = {}, status = 200): Promise<Page> => {
    const users = await actions.users(s.me);
    return {
      title: 'Users',
      status,
      body: html`<div class="table" tabindex="0" role="region" aria-label="Users"><table><caption class="muted">People of ${s.me.organizationId}</caption><thead><tr><th scope="col">E-mail</th><th scope="col">Role</th><th scope="col">Status</th><th scope="col">Since</th></tr></thead>
        <tbody>${users.map((u) => html`<tr><td>${u.email}</td><td>${u.role}</td><td>${u.active ? 'active' : 'invited'}</td><td>${when(u.created_at)}</td></tr>`)}</tbody></table></div>
        <section><h2>Invite someone</h2><form method="post" action="${PORTAL}/users" novalidate>${csrf(s.session)}${formError(errors)}
        ${field('email', 'E-mail', { type: 'email', values, errors, required: true })}
        <label for="role">Role</label><select id="role" name="role">${(['developer', 'viewer', 'admin'] as const).map((r) => html`<option value="${r}" ${values.role === r ? html`selected` : ''}>${r}</option>`)}</select>
        <p><button type="submit">Invite</button></p></form></section>`,
    };
  };
  router.get('/users', signed('portalListUsers', 'admin', (s) => usersPage(s)));
  router.post(
    '/users',
    signed('portalInviteUser', 'admin', async (s) => {
      const values = { email: one(s.form, 'email'), role: one(s.form, 'role') };
      const done = await attempt(() => actions.invite(s.me, Invitation.parse(values)));
      if ('errors' in done) return usersPage(s, values, done.errors, 422);
      return secretPage('Invitation created', 'set-password link', done.ok.set_password_link, html`<p>Send this link to <strong>${done.ok.user.email}</strong> (${done.ok.user.role}). It works once, for 24 hours.</p>`, `${PORTAL}/users`);
    }),
  );

  return router;
}
