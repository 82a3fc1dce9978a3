import { withDatabase } from '../db/command';
import { eventDeliveries } from './deliveries';
import { setFullPayload } from './subscriptions';

const USAGE = 'pont webhooks full-payload SUBSCRIPTION_ID on|off | pont webhooks attempts EVENT_ID';

/** `pont webhooks …`: operator switches and views. Returns the exit code. */
export async function webhooksCommand(args: string[]): Promise<number> {
  const [action, id, value] = args;
  if (action === 'full-payload' && id && (value === 'on' || value === 'off')) {
    const changed = await withDatabase((db) => setFullPayload(db, id, value === 'on'));
    if (!changed) {
      console.error(`No active subscription ${id}`);
      return 1;
    }
    console.log(`Subscription ${id}: full payloads ${value}`);
    return 0;
  }
  if (action === 'attempts' && id && value === undefined) {
    const found = await withDatabase((db) => eventDeliveries(db, null, id));
    if (!found) {
      console.error(`No event ${id}`);
      return 1;
    }
    console.log(JSON.stringify(found, null, 2));
    return 0;
  }
  console.error(`Usage: ${USAGE}`);
  return 1;
}
