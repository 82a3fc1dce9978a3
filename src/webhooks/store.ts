import type { Database } from '../db/database';
import { eventDeliveries, listDeliveries } from './deliveries';
import { listSubscriptions, unsubscribe } from './subscriptions';

/** The webhook queries on the process's database, the caller's organisation given by the route. */
export function webhookStore(db: Database) {
  const onDb =
    <A extends unknown[], R>(fn: (db: Database, ...args: A) => R) =>
    (...args: A) =>
      fn(db, ...args);
  return { listSubscriptions: onDb(listSubscriptions), unsubscribe: onDb(unsubscribe), listDeliveries: onDb(listDeliveries), eventDeliveries: onDb(eventDeliveries) };
}
export type WebhookStore = ReturnType<typeof webhookStore>;
