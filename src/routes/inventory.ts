import { z } from 'zod';
import { isFhirDate } from '../core/fhir-dates';
import { ErrorSchema } from '../http/openapi';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../http/services';
import { BLOOD_COMPONENTS, BLOOD_GROUPS, EXPIRING_DAYS, readBloodInventory } from '../inventory/blood';
import { DEFAULT_TIME_ZONE, isTimeZone, PAYMENT_METHODS, readReconciliation } from '../inventory/payments';
import { putStock, readStockLines } from '../inventory/pharmacy';

const CONNECT = '/api/v1/connect';
/** A real calendar date, YYYY-MM-DD (one check, so one problem per bad value). */
function CalendarDateOf() {
  return z
    .string()
    .refine((d) => d.length === 10 && isFhirDate(d), 'must be a real calendar date, YYYY-MM-DD')
    .describe('YYYY-MM-DD');
}
const CalendarDate = CalendarDateOf();
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

const Code = z.string().trim().min(1).max(100);
const StockMedication = z.object({ code: Code, code_system: z.url().max(300).describe('The code system URI, e.g. http://www.nlm.nih.gov/research/umls/rxnorm'), display: z.string().trim().min(1).max(300).nullish() }).strict();
const Quantity = z.number().finite().nonnegative().max(1e12);
const StockLine = z
  .object({
    medication: StockMedication,
    quantity_on_hand: Quantity,
    unit: z.string().trim().min(1).max(50).nullish(),
    reorder_level: Quantity.nullish(),
    batches: z
      .array(z.object({ lot: z.string().trim().min(1).max(100), expires_on: CalendarDateOf().nullish(), quantity: Quantity }).strict())
      .max(1000)
      .optional()
      .describe('When given, their quantities add up to quantity_on_hand'),
  })
  .strict();
const StockItem = StockLine.extend({
  facility_id: z.string(),
  unit: z.string().nullable(),
  reorder_level: z.number().nullable(),
  batches: z.array(z.object({ lot: z.string(), expires_on: z.string().nullable(), quantity: z.number() })),
  updated_at: z.string(),
}).meta({ id: 'PharmacyStockLine' });
const StockPut = z.object({ facility_id: FacilityId, items: z.array(StockLine).min(1).max(5000) }).strict().meta({ id: 'PharmacyStockUpdate' });

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


export function inventoryRoutes(services: Services): RouteSpec[] {
  return [
    defineRoute({
      method: 'get',
      path: `${CONNECT}/pharmacy/stock`,
      operationId: 'getPharmacyStock',
      summary: 'Pharmacy stock levels by facility and medication, with their batches',
      description:
        'One item per facility and medication (FHIR Medication resources, one per batch: mappings/pharmacy-stock.map.yaml). Filters: facility, a medication code or words of its name, lines below their reorder level. Paged with `offset` (`next_offset`). Not patient data: every organisation with the scope sees the network\'s stock.',
      tags: ['Connect', 'Inventory'],
      security: { kind: 'client', scope: 'pharmacy:stock:read' },
      query: z
        .object({
          facility_id: FacilityId.optional(),
          medication: z.string().trim().min(1).max(100).optional().describe('A medication code, or text in its name'),
          below_reorder_level: z.enum(['true', 'false']).optional(),
          limit: z.coerce.number().int().min(1).max(1000).default(100),
          offset: z.coerce.number().int().min(0).max(10_000_000).default(0),
        })
        .strict(),
      responses: { 200: { description: 'Stock lines', schema: z.object({ items: z.array(StockItem), next_offset: z.number().int().nullable() }).meta({ id: 'PharmacyStock' }) } },
      async handler({ query, repo }) {
        return { body: await readStockLines(repo, { ...query, below_reorder_level: query.below_reorder_level === 'true' }) };
      },
    }),
    defineRoute({
      method: 'put',
      path: `${CONNECT}/pharmacy/stock`,
      operationId: 'putPharmacyStock',
      summary: "Set a facility's stock levels, in bulk",
      description:
        "Each item replaces that medication's stock at the facility (its batches: a batch no longer listed is removed); medications not listed are left as they are. Idempotent: applying the same levels again changes nothing. The answer counts the lines created, changed and unchanged. Only a client bound to that facility (or an operator client) may set it: others get 403.",
      tags: ['Connect', 'Inventory'],
      security: { kind: 'client', scope: 'pharmacy:write' },
      body: StockPut,
      responses: {
        200: { description: 'Applied', schema: z.object({ facility_id: z.string(), lines: z.number().int(), created: z.number().int(), changed: z.number().int(), unchanged: z.number().int() }).meta({ id: 'PharmacyStockApplied' }) },
        422: { description: 'Invalid line (VALIDATION_FAILED), every problem listed', schema: ErrorSchema },
      },
      async handler({ body, repo }) {
        // Only a client bound to this facility (or an operator) may: the write policy (src/policy) decides.
        return { body: await putStock(repo, services.mappings, body.facility_id, body.items) };
      },
    }),
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
      async handler({ query, repo }) {
        // The caller's organisation's payments, an operator's of every organisation: the repository's policy decides.
        return {
          body: await readReconciliation(repo, {
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
      async handler({ query, repo }) {
        return { body: { items: await readBloodInventory(repo, query) } };
      },
    }),
  ];
}
