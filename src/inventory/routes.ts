import { z } from 'zod';
import { ErrorSchema } from '../http/openapi';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../services';
import type { ClientPrincipal } from '../auth/principal';
import { BLOOD_COMPONENTS, BLOOD_GROUPS, bloodInventory, EXPIRING_DAYS } from './blood';
import { DEFAULT_TIME_ZONE, isTimeZone, PAYMENT_METHODS, reconciliation } from './payments';

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

const Money = z.number();
const Reconciliation = z
  .object({
    date: z.string(),
    time_zone: z.string(),
    facility_id: z.string().nullable(),
    payments: z.array(
      z.object({
        payment_id: z.string().describe('The FHIR PaymentReconciliation'),
        facility_id: z.string(),
        paid_at: z.string(),
        payer: z.string().nullable(),
        method: z.enum(PAYMENT_METHODS),
        amount: Money,
        currency: z.string().describe('ISO 4217'),
        amount_due: Money.nullable(),
        reference: z.string().nullable(),
        status: z.enum(['active', 'cancelled', 'draft', 'entered-in-error']),
        reconciled: z.boolean(),
        problems: z.array(z.enum(['amount_mismatch', 'currency_mismatch', 'missing_reference'])),
      }),
    ),
    totals: z.object({
      by_method: z.array(z.object({ method: z.string(), currency: z.string(), count: z.number().int(), amount: Money })),
      by_currency: z.array(z.object({ currency: z.string(), count: z.number().int(), amount: Money })),
    }).describe('Of the active payments (cancelled ones are listed, not counted)'),
    unreconciled: z.number().int(),
  })
  .meta({ id: 'PaymentReconciliationDay' });

const CalendarDate = z.iso
  .date()
  .refine((d) => { const t = Date.parse(`${d}T00:00:00Z`); return !Number.isNaN(t) && new Date(t).toISOString().startsWith(d); }, 'must be a real calendar date')
  .describe('YYYY-MM-DD');

export function inventoryRoutes(services: Services): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      path: `${CONNECT}/payments/reconciliation`,
      operationId: 'getPaymentReconciliation',
      summary: "A day's payments with totals per method and currency, and those that do not reconcile",
      description: `The payments (FHIR PaymentReconciliation, mappings/payment.map.yaml) of the caller's organisation received on \`date\` in \`time_zone\` (default ${DEFAULT_TIME_ZONE}), of one facility or all. A payment does not reconcile when the amount received differs from the amount due, the currencies differ, or a mobile-money, card or insurance payment has no reference.`,
      tags: ['Connect', 'Payments'],
      security: { kind: 'client', scope: 'payments:read' },
      query: z
        .object({
          date: CalendarDate,
          facility_id: FacilityId.optional(),
          time_zone: z.string().refine(isTimeZone, 'must be an IANA time zone such as Africa/Douala').optional(),
        })
        .strict(),
      responses: { 200: { description: "The day's payments", schema: Reconciliation }, 422: { description: 'Bad date, facility or time zone (VALIDATION_FAILED)', schema: ErrorSchema } },
      async handler({ query, principal }) {
        const client = principal as ClientPrincipal;
        return {
          body: await reconciliation(services.db, {
            organizationId: client.allPatients ? undefined : client.organizationId,
            date: query.date,
            timeZone: query.time_zone ?? DEFAULT_TIME_ZONE,
            facilityId: query.facility_id,
          }),
        };
      },
    }),
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
