import type { RouteSpec } from '../http/routes';
import type { Services } from '../services';

export function patientRoutes(_services: Services): RouteSpec[] {
  return [];
}
