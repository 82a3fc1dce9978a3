import { z } from 'zod';
import { ErrorSchema } from '../http/openapi';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../services';
import { BLOOD_COMPONENTS, BLOOD_GROUPS, bloodInventory, EXPIRING_DAYS } from './blood';

const CONNECT = '/api/v1/connect';
const FacilityId = z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be a facility id (1-64 of A-Z a-z 0-9 . _ -)');

const BloodInventory = z
  .object({
    items: z.array(
      z.object({
        facility_id: z.string(),
        blood_group: z.enum(BLOOD_GROUPS),
        component: z.enum(BLOOD_COMPONENTS),
        units_available: z.number().int().describe('Available units not yet expired'),
        units_expiring_within_7_days: z.number().int().describe(`Of those, the units that expire within ${EXPIRING_DAYS} days`),
        updated_at: z.string().describe('When a unit of this line last changed'),
      }),
    ),
  })
  .meta({ id: 'BloodInventory' });

export function inventoryRoutes(services: Services): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      path: `${CONNECT}/blood-bank/inventory`,
      operationId: 'getBloodInventory',
      summary: 'Blood-bank inventory by facility, blood group and component',
      description:
        'An aggregate over the blood-bank units (FHIR BiologicallyDerivedProduct, mappings/blood-unit.map.yaml) of every facility, or of the ones filtered: one item per facility, group and component that has units. Units come from Bridge sync or FHIR writes. Not patient data: any organisation with the scope sees the network\'s stock.',
      tags: ['Connect', 'Inventory'],
      security: { kind: 'client', scope: 'blood:inventory:read' },
      query: z
        .object({
          facility_id: FacilityId.optional(),
          blood_group: z.enum(BLOOD_GROUPS).optional(),
          component: z.enum(BLOOD_COMPONENTS).optional(),
        })
        .strict(),
      responses: { 200: { description: 'The inventory', schema: BloodInventory }, 422: { description: 'Unknown blood group or component (VALIDATION_FAILED)', schema: ErrorSchema } },
      async handler({ query }) {
        return { body: { items: await bloodInventory(services.db, query) } };
      },
    }),
  ];
}
