import type { RouteSpec } from '../http/routes';
import type { Services } from '../services';

export function bridgeRoutes(_services: Services): RouteSpec[] {
  return [];
}
