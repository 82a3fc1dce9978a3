import type { Config } from '../config';
import type { Database } from '../db/database';
import type { AccessControl } from '../http/routes';

/**
 * PLACEHOLDER until the access layer lands (issue 3): lets every request through.
 * Replaced by real authentication (Bearer JWT / client credentials / bridge-agent keys) and scopes.
 */
export async function createAccessControl(_deps: { config: Config; db: Database }): Promise<AccessControl> {
  return { authorize: async () => undefined };
}
