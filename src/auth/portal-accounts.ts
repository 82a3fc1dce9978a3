import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import argon2 from 'argon2';
import { z } from 'zod';
import type { Queryable } from '../db/database';
import { EntityId } from './clients';

/** Who may do what in the portal: admin everything, developer all but users, viewer reads only. */
export const PORTAL_ROLES = ['admin', 'developer', 'viewer'] as const;
export type PortalRole = (typeof PORTAL_ROLES)[number];
const RANK: Record<PortalRole, number> = { viewer: 0, developer: 1, admin: 2 };
export const roleAllows = (role: PortalRole, needed: PortalRole) => RANK[role] >= RANK[needed];

/** Argon2id for passwords people choose: OWASP's first recommended setting (46 MiB, 1 pass). */
const PASSWORD_HASH = { type: argon2.argon2id, memoryCost: 47_104, timeCost: 1, parallelism: 1 } as const;
export const MIN_PASSWORD_LENGTH = 12;
const MAX_PASSWORD_LENGTH = 256;

/** How long things last (ms). */
export const SET_PASSWORD_LINK_MS = 24 * 3600_000;
/** The page a set-password token opens (printed by the CLI, shown to an admin who invites). */
export const setPasswordLink = (publicUrl: string, token: string) => `${publicUrl}/portal/set-password?token=${encodeURIComponent(token)}`;
/** Defaults of PONT_PORTAL_SESSION_IDLE and PONT_PORTAL_SESSION_MAX. */
export const SESSION_IDLE_MS = 30 * 60_000;
export const SESSION_ABSOLUTE_MS = 12 * 3600_000;
/** Failed sign-ins allowed per window, per account and per address (attempts are counted before they are checked). */
export const SIGN_IN_WINDOW_MS = 15 * 60_000;
export const MAX_FAILURES_PER_ACCOUNT = 5;
export const MAX_FAILURES_PER_ADDRESS = 30;

export const Email = z
  .string()
  .trim()
  .toLowerCase()
  .max(254)
  .regex(/^[^\s@<>"]+@[^\s@<>"]+\.[^\s@<>"]+$/, 'give an e-mail address such as ana@example.org');

export const NewPortalUser = z.object({ organizationId: EntityId, email: Email, role: z.enum(PORTAL_ROLES).default('developer') });

export interface PortalUser {
  id: string;
  organization_id: string;
  email: string;
  role: PortalRole;
  /** False until the person has used their set-password link. */
  active: boolean;
  created_at: string;
}

/** A signed-in person, as the routes see them. */
export interface PortalSession {
  user: PortalUser;
  csrfToken: string;
  expiresAt: number;
}

interface UserRow {
  id: string;
  organization_id: string;
  email: string;
  role: PortalRole;
  password_hash: string | null;
  created_at: Date | string;
}

const USER_COLUMNS = 'u.id, u.organization_id, u.email, u.role, u.password_hash, u.created_at';
const toUser = (row: UserRow): PortalUser => ({
  id: row.id,
  organization_id: row.organization_id,
  email: row.email,
  role: row.role,
  active: row.password_hash !== null,
  created_at: new Date(row.created_at).toISOString(),
});

const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest('hex');
const token = () => randomBytes(32).toString('base64url');

export class SignInRefused extends Error {
  constructor(readonly retryAfterSeconds?: number) {
    super(retryAfterSeconds ? 'Too many failed sign-ins' : 'Wrong e-mail or password');
  }
}

/**
 * Portal people, their set-password links, sessions and failed sign-ins (migration 021). Every time is read from
 * `now` (epoch ms), which tests move.
 */
export class PortalAccounts {
  private decoy?: Promise<string>;

  constructor(
    private readonly db: Queryable,
    /** How long a session lives idle, and at most after sign-in (PONT_PORTAL_SESSION_IDLE, PONT_PORTAL_SESSION_MAX). */
    readonly sessionTimes: { idleMs: number; absoluteMs: number } = { idleMs: SESSION_IDLE_MS, absoluteMs: SESSION_ABSOLUTE_MS },
    public now: () => number = Date.now,
  ) {}

  /** A person of an organisation and a one-time set-password token (valid 24 h). A known e-mail is refused. */
  async create(input: z.input<typeof NewPortalUser>, invitedBy?: string): Promise<{ user: PortalUser; setPasswordToken: string } | 'exists'> {
    const valid = NewPortalUser.parse(input);
    const id = `pu_${randomBytes(12).toString('hex')}`;
    const { rows } = await this.db.query<UserRow>(
      `INSERT INTO portal_users AS u (id, organization_id, email, role, invited_by) VALUES ($1, $2, $3, $4, $5)
       ON CONFLICT (email) DO NOTHING RETURNING ${USER_COLUMNS}`,
      [id, valid.organizationId, valid.email, valid.role, invitedBy ?? null],
    );
    if (!rows[0]) return 'exists';
    return { user: toUser(rows[0]), setPasswordToken: await this.newPasswordLink(id) };
  }

  /**
   * What create answers for a new person, made up for an address that has an account already (of any
   * organisation): a new id and a link that works nowhere, nothing stored. An admin who invites learns nothing of
   * other organisations' people from the answer (docs/integrators.md "Developer portal").
   */
  lookalike(input: z.input<typeof NewPortalUser>): { user: PortalUser; setPasswordToken: string } {
    const valid = NewPortalUser.parse(input);
    const user: PortalUser = {
      id: `pu_${randomBytes(12).toString('hex')}`,
      organization_id: valid.organizationId,
      email: valid.email,
      role: valid.role,
      active: false,
      created_at: new Date(this.now()).toISOString(),
    };
    return { user, setPasswordToken: token() };
  }

  /** A fresh one-time set-password token for the person; earlier unused ones stop working. */
  async newPasswordLink(userId: string): Promise<string> {
    const secret = token();
    await this.db.query('DELETE FROM portal_password_tokens WHERE user_id = $1 AND used_at IS NULL', [userId]);
    await this.db.query('INSERT INTO portal_password_tokens (token_sha256, user_id, expires_at) VALUES ($1, $2, $3)', [
      sha256(secret),
      userId,
      this.now() + SET_PASSWORD_LINK_MS,
    ]);
    return secret;
  }

  /** The person a set-password token is for, while it is unused and unexpired. */
  async passwordLinkUser(secret: string): Promise<PortalUser | undefined> {
    if (secret.length > 100) return undefined;
    const { rows } = await this.db.query<UserRow>(
      `SELECT ${USER_COLUMNS} FROM portal_password_tokens t JOIN portal_users u ON u.id = t.user_id
       WHERE t.token_sha256 = $1 AND t.used_at IS NULL AND t.expires_at > $2`,
      [sha256(secret), this.now()],
    );
    return rows[0] && toUser(rows[0]);
  }

  /**
   * Sets the password with a set-password token (used up here) and ends the person's sessions (signed out
   * everywhere). The Argon2id hash is computed first, whether or not the token is good: the same time either way.
   */
  async setPassword(secret: string, password: string): Promise<PortalUser | undefined> {
    const hash = await argon2.hash(password, PASSWORD_HASH);
    const { rows } = await this.db.query<UserRow>(
      `WITH used AS (
         UPDATE portal_password_tokens SET used_at = $2 WHERE token_sha256 = $1 AND used_at IS NULL AND expires_at > $2 RETURNING user_id
       ), ended AS (
         DELETE FROM portal_sessions WHERE user_id IN (SELECT user_id FROM used)
       )
       UPDATE portal_users u SET password_hash = $3 FROM used WHERE u.id = used.user_id RETURNING ${USER_COLUMNS}`,
      [sha256(secret), this.now(), hash],
    );
    return rows[0] && toUser(rows[0]);
  }

  /**
   * Signs in: a new session (a new id whatever the request carried: no fixation). Unknown e-mail, a person without
   * a password yet and a wrong password are refused alike, after one Argon2id verification each. The attempt is
   * counted (account and address, one atomic statement) before the password is checked, so concurrent guesses
   * cannot all be checked against a count none of them has raised yet: past the limit the attempt is refused at
   * once (429), the right password too, until the window ends. A right password takes its attempt back.
   */
  async signIn(emailText: string, password: string, address: string): Promise<{ sessionId: string; session: PortalSession }> {
    const email = Email.safeParse(emailText).success ? Email.parse(emailText) : emailText.trim().toLowerCase().slice(0, 254);
    const keys = [`account:${email}`, `address:${address}`];
    const window = await this.countAttempt(keys);
    const { rows } = await this.db.query<UserRow>(`SELECT ${USER_COLUMNS} FROM portal_users u WHERE u.email = $1`, [email]);
    const row = rows[0];
    const ok = await this.verifyPassword(row?.password_hash ?? null, password);
    if (!ok || !row) throw new SignInRefused();
    await this.db.query('UPDATE portal_sign_in_failures SET count = count - 1 WHERE key = ANY($1) AND window_start = $2 AND count > 0', [keys, window]);
    const sessionId = token();
    const now = this.now();
    // Sessions nobody ended (closed browsers) go when anyone signs in: the table holds live sessions only.
    await this.db.query('DELETE FROM portal_sessions WHERE expires_at <= $1 OR last_seen_at <= $2', [now, now - this.sessionTimes.idleMs]);
    const csrfToken = token();
    const expiresAt = now + this.sessionTimes.absoluteMs;
    await this.db.query(
      'INSERT INTO portal_sessions (id_sha256, user_id, csrf_token, created_at, last_seen_at, expires_at) VALUES ($1, $2, $3, $4, $4, $5)',
      [sha256(sessionId), row.id, csrfToken, now, expiresAt],
    );
    return { sessionId, session: { user: toUser(row), csrfToken, expiresAt } };
  }

  /** One Argon2id verification whether or not there is a hash to check (a decoy's otherwise): the same time either way. */
  private async verifyPassword(hash: string | null, password: string): Promise<boolean> {
    const checked = hash ?? (await (this.decoy ??= argon2.hash(token(), PASSWORD_HASH)));
    return password.length <= MAX_PASSWORD_LENGTH && (await argon2.verify(checked, password)) && hash !== null;
  }

  /** The live session of a cookie value, its idle time restarted; undefined when there is none (and ended when expired). */
  async session(sessionId: string): Promise<PortalSession | undefined> {
    if (!sessionId || sessionId.length > 100) return undefined;
    const now = this.now();
    const { rows } = await this.db.query<UserRow & { csrf_token: string; expires_at: string }>(
      `UPDATE portal_sessions s SET last_seen_at = $2 FROM portal_users u
       WHERE s.id_sha256 = $1 AND u.id = s.user_id AND s.last_seen_at > $3 AND s.expires_at > $2
       RETURNING ${USER_COLUMNS}, s.csrf_token, s.expires_at`,
      [sha256(sessionId), now, now - this.sessionTimes.idleMs],
    );
    const row = rows[0];
    if (!row) {
      await this.signOut(sessionId);
      return undefined;
    }
    return { user: toUser(row), csrfToken: row.csrf_token, expiresAt: Number(row.expires_at) };
  }

  async signOut(sessionId: string): Promise<void> {
    await this.db.query('DELETE FROM portal_sessions WHERE id_sha256 = $1', [sha256(sessionId)]);
  }

  async users(organizationId: string): Promise<PortalUser[]> {
    const { rows } = await this.db.query<UserRow>(`SELECT ${USER_COLUMNS} FROM portal_users u WHERE u.organization_id = $1 ORDER BY u.created_at, u.id`, [
      organizationId,
    ]);
    return rows.map(toUser);
  }

  private windowStart(): number {
    const now = this.now();
    return now - (now % SIGN_IN_WINDOW_MS);
  }

  /**
   * Counts a sign-in attempt of each key in the current window, in one statement that increments and returns the
   * counts (the rows locked in key order: no deadlock between attempts), shared by every process; throws 429
   * once a key is past its limit. Returns the window's start.
   */
  private async countAttempt(keys: string[]): Promise<number> {
    const start = this.windowStart();
    // Windows that ended go; rows another attempt is deleting are skipped, never waited for (no lock cycle).
    await this.db.query(
      'DELETE FROM portal_sign_in_failures WHERE (key, window_start) IN (SELECT key, window_start FROM portal_sign_in_failures WHERE window_start < $1 FOR UPDATE SKIP LOCKED)',
      [start],
    );
    const { rows } = await this.db.query<{ key: string; count: number }>(
      `INSERT INTO portal_sign_in_failures AS f (key, window_start, count) SELECT k, $2, 1 FROM unnest($1::text[]) AS k ORDER BY k
       ON CONFLICT (key, window_start) DO UPDATE SET count = f.count + 1 RETURNING key, count`,
      [keys, start],
    );
    const locked = rows.some((r) => r.count > (r.key.startsWith('account:') ? MAX_FAILURES_PER_ACCOUNT : MAX_FAILURES_PER_ADDRESS));
    if (locked) throw new SignInRefused(Math.max(1, Math.ceil((start + SIGN_IN_WINDOW_MS - this.now()) / 1000)));
    return start;
  }
}

/** Constant-time comparison of two tokens (CSRF); an empty token matches nothing. */
export function sameToken(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length > 0 && x.length === y.length && timingSafeEqual(x, y);
}
