import type { RouteSpec } from '../http/routes';
import type { Services } from '../services';

export function webhookRoutes(_services: Services): RouteSpec[] {
  return [];
}
