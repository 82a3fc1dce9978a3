import { z } from 'zod';
import { loadConfig } from '../config';
import { withDatabase } from '../db/command';
import { flagProblems, issueProblems, UsageError } from '../cli-args';
import { NewPortalUser, PortalAccounts, setPasswordLink, type PortalUser } from '../auth/portal-accounts';

export { setPasswordLink };

const FLAGS: Record<string, string> = { organizationId: '--org', email: '--email', role: '--role' };

/** `pont portal-users create`'s values (src/cli.ts checks them beside the parser, before the command runs). */
export const checkPortalUserFlags = (o: { org?: string; email?: string; role?: string }) =>
  flagProblems([
    { flag: '--org', value: o.org, schema: NewPortalUser.shape.organizationId },
    { flag: '--email', value: o.email, schema: NewPortalUser.shape.email },
    { flag: '--role', value: o.role, schema: NewPortalUser.shape.role, what: 'a role' },
  ]);

/** `pont portal-users create`: the person, and their one-time set-password link (valid 24 h), as JSON. */
export async function createPortalUserCommand(o: { org: string; email: string; role?: string }): Promise<number> {
  const publicUrl = loadConfig().publicUrl;
  let created: { user: PortalUser; setPasswordToken: string } | 'exists';
  try {
    created = await withDatabase((db) => new PortalAccounts(db).create({ organizationId: o.org, email: o.email, role: o.role as never }));
  } catch (err) {
    if (err instanceof z.ZodError) throw new UsageError(issueProblems(err, FLAGS).join('\n'));
    throw err;
  }
  if (created === 'exists') throw new Error(`A portal user with the e-mail ${o.email} exists already`);
  const link = setPasswordLink(publicUrl, created.setPasswordToken);
  console.log(JSON.stringify({ ...created.user, set_password_link: link, link_expires_in_hours: 24 }, null, 2));
  return 0;
}
