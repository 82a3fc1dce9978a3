import type { RouteSpec } from '../http/routes';
import type { Services } from '../services';

export function authRoutes(_services: Services): RouteSpec[] {
  return [];
}
