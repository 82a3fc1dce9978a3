import type { Database, Queryable } from '../db/database';
import { NotifiedCache } from '../db/notified-cache';

/** Every change to a consent that limits reads is announced here, by a trigger, with its organisation (migration 035). */
export const READ_LIMIT_CHANGES_CHANNEL = 'pont_read_limit_changes';
/** Organisations kept in memory per process; the oldest go first. */
const MAX_CACHED_ORGANIZATIONS = 10_000;

/**
 * Which organisations hold an active consent that limits how often they may read (a consent artefact's
 * `frequency`): only their reads are counted (src/policy readFacts, one statement more per audited read). Kept per
 * process while it listens for changes (a trigger announces each, on every path); a consent's start or end in time
 * changes nothing here (the count itself judges those), only a change to its row does.
 */
export class ReadLimits {
  private readonly limited = new NotifiedCache<boolean>(MAX_CACHED_ORGANIZATIONS);

  constructor(private readonly db: Queryable) {}

  async listen(): Promise<void> {
    const db = this.db as Partial<Database>;
    if (db.listen) await this.limited.listen(db as Database, READ_LIMIT_CHANGES_CHANNEL);
  }

  async close(): Promise<void> {
    await this.limited.close();
  }

  /** Called in the transaction that changes a consent of `organizationId` (src/consents/record.ts), before it commits. */
  changing(organizationId: string): void {
    this.limited.changing(organizationId);
  }

  /** What this process knows, without asking: false when it knows the organisation holds no such consent. */
  known(organizationId: string): boolean | undefined {
    return this.limited.get(organizationId);
  }

  /** Does `organizationId` hold an active consent that limits its reads? `sql`: the caller's transaction, when in one. */
  async limits(organizationId: string, sql: Queryable = this.db): Promise<boolean> {
    const known = this.limited.get(organizationId);
    if (known !== undefined) return known;
    const since = this.limited.since();
    const { rows } = await sql.query<{ limited: boolean }>(
      `SELECT EXISTS (SELECT 1 FROM consent_access WHERE organization_id = $1 AND frequency_count IS NOT NULL AND status = 'active') AS limited`,
      [organizationId],
    );
    const limited = rows[0]!.limited;
    this.limited.set(organizationId, limited, since);
    return limited;
  }
}
