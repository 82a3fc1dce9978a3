import type { Context } from 'koa';
import type { Config } from '../config';
import { ApiError, ErrorCode } from '../core/errors';
import type { PortalPrincipal } from '../core/principal';
import { roleAllows, sameToken, type PortalAccounts, type PortalRole, type PortalSession } from './portal-accounts';

/** The session cookie (interface §5 SessionAuth); `__Host-` prefixed when Pont is served over HTTPS. */
export function sessionCookieName(config: Config): string {
  return config.publicUrl.startsWith('https://') ? '__Host-service_session' : 'service_session';
}

/** Portal cookies are Secure outside development, and whenever Pont is served over HTTPS. */
export const secureCookies = (config: Config) => config.environment !== 'development' || config.publicUrl.startsWith('https://');

/** HttpOnly, SameSite=Lax, path /, Secure as secureCookies says (always with the `__Host-` prefix). */
function cookieOptions(config: Config, maxAgeMs: number) {
  return { httpOnly: true, sameSite: 'lax' as const, secure: secureCookies(config), path: '/', maxAge: maxAgeMs, overwrite: true };
}

/** Writes the cookie; koa refuses `secure` on a plain-HTTP request unless told the connection is trusted. */
export function setSessionCookie(ctx: Context, config: Config, sessionId: string): void {
  ctx.cookies.secure = true; // the operator's proxy terminates TLS; the attribute must be sent whatever the hop
  ctx.cookies.set(sessionCookieName(config), sessionId, cookieOptions(config, config.portalSessions.absoluteMs));
}

export function clearSessionCookie(ctx: Context, config: Config): void {
  ctx.cookies.secure = true;
  ctx.cookies.set(sessionCookieName(config), '', { ...cookieOptions(config, 0), maxAge: undefined, expires: new Date(0) });
}

export const sessionIdOf = (ctx: Context, config: Config) => ctx.cookies.get(sessionCookieName(config)) ?? '';

/** Methods that change nothing: no CSRF token, and a viewer may use them. */
export const isSafeMethod = (method: string) => method === 'GET' || method === 'HEAD';

export const CSRF_HEADER = 'x-csrf-token';
export const CSRF_FIELD = '_csrf';

export const csrfRefused = () => new ApiError(403, ErrorCode.forbidden, 'Missing or wrong CSRF token: send the session\'s token in X-CSRF-Token (or the _csrf form field)');

/** The principal of a portal session, for the policy and the audit trail. */
export function portalPrincipal(session: PortalSession): PortalPrincipal {
  const { user } = session;
  return { kind: 'portal-user', userId: user.id, email: user.email, organizationId: user.organization_id, role: user.role };
}

/**
 * A portal request's checks, in one place for the JSON routes and the pages: a live session (401), the session's
 * CSRF token on every state-changing request (403), and the role (viewer: reads only; `needed` for more).
 */
export async function authorizeSession(
  ctx: Context,
  accounts: PortalAccounts,
  config: Config,
  options: { needed?: PortalRole; csrf?: string },
): Promise<PortalSession> {
  const session = await accounts.session(sessionIdOf(ctx, config));
  if (!session) throw new ApiError(401, ErrorCode.unauthenticated, 'Sign in to the developer portal first (cookie service_session)');
  const safe = isSafeMethod(ctx.method);
  if (!safe && !sameToken(options.csrf ?? ctx.get(CSRF_HEADER), session.csrfToken)) throw csrfRefused();
  const needed = options.needed ?? (safe ? 'viewer' : 'developer');
  if (!roleAllows(session.user.role, needed)) {
    throw new ApiError(403, ErrorCode.forbidden, `This needs the ${needed} role; you are ${session.user.role}`);
  }
  return session;
}
