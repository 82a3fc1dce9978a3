import type { Database, Queryable } from '../db/database';
import { NotifiedCache } from '../db/notified-cache';

/**
 * Every change to a consent that limits or scopes reads is announced here, by a trigger, with its organisation
 * (migrations 035, 042).
 */
export const READ_LIMIT_CHANGES_CHANNEL = 'pont_read_limit_changes';
/** Organisations kept in memory per process; the oldest go first. */
const MAX_CACHED_ORGANIZATIONS = 10_000;

/** What an organisation's active consents hold beyond plain grants (a class, a patient, until an expiry). */
export interface ConsentKinds {
  /** One limits how often the organisation may read (a consent artefact's `frequency`). */
  limited: boolean;
  /** One names kinds of record or a period of care (`hi_types`, `date_range`). */
  scoped: boolean;
}

/**
 * Which organisations hold an active consent that limits how often they may read, or scopes what it opens: only
 * their reads are counted (src/policy readFacts, one statement more per audited read), and only their rows are
 * judged by the kinds and dates of their grants (the rest by a shorter rule). Kept per process while it listens for
 * changes (a trigger announces each, on every path); a consent's start or end in time changes nothing here (the
 * rule and the count judge those), only a change to its row does.
 */
export class ReadLimits {
  private readonly kinds = new NotifiedCache<ConsentKinds>(MAX_CACHED_ORGANIZATIONS);

  constructor(private readonly db: Queryable) {}

  async listen(): Promise<void> {
    const db = this.db as Partial<Database>;
    if (db.listen) await this.kinds.listen(db as Database, READ_LIMIT_CHANGES_CHANNEL);
  }

  async close(): Promise<void> {
    await this.kinds.close();
  }

  /** Called in the transaction that changes a consent of `organizationId` (src/consents/record.ts), before it commits. */
  changing(organizationId: string): void {
    this.kinds.changing(organizationId);
  }

  /** What this process knows, without asking; undefined when it does not know. */
  known(organizationId: string): ConsentKinds | undefined {
    return this.kinds.get(organizationId);
  }

  /** Does `organizationId` hold an active consent that limits its reads? `sql`: the caller's transaction, when in one. */
  async limits(organizationId: string, sql: Queryable = this.db): Promise<boolean> {
    const known = this.kinds.get(organizationId);
    if (known !== undefined) return known.limited;
    const since = this.kinds.since();
    const { rows } = await sql.query<ConsentKinds>(
      `SELECT EXISTS (SELECT 1 FROM consent_access WHERE organization_id = $1 AND frequency_count IS NOT NULL AND status = 'active') AS limited,
              EXISTS (SELECT 1 FROM consent_access WHERE organization_id = $1 AND (resource_types IS NOT NULL OR data_from IS NOT NULL OR data_to IS NOT NULL) AND status = 'active') AS scoped`,
      [organizationId],
    );
    const kinds = rows[0]!;
    this.kinds.set(organizationId, kinds, since);
    return kinds.limited;
  }
}
