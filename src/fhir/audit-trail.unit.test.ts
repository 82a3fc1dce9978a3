import { describe, expect, it } from 'vitest';
import { auditRow, type AuditRecord } from '../audit/audit';
import { commitsAsynchronously } from './audit-trail';

const read = (extra: Partial<AuditRecord> = {}) => auditRow({ caller: {}, operation: 'readResource', action: 'R', outcome: 'success', ...extra });

describe('the audit group commit', () => {
  it('is asynchronous on a PostgreSQL server, for reads and refusals', () => {
    expect(commitsAsynchronously('postgres', [read(), read({ outcome: 'minor-failure' })])).toBe(true);
  });
  it('waits for the disk when the group holds a break-glass read, whatever else it holds', () => {
    expect(commitsAsynchronously('postgres', [read(), read({ breakGlass: true, purpose: 'unconscious on arrival' }), read()])).toBe(false);
  });
  it('is always synchronous on embedded PGlite, which is Pont\'s own process', () => {
    expect(commitsAsynchronously('pglite', [read()])).toBe(false);
  });
});
