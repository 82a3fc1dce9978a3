import type { RouteSpec } from '../http/routes';
import type { Services } from '../services';

export function fhirRoutes(_services: Services): RouteSpec[] {
  return [];
}
