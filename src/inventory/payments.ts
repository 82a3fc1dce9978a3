import type { PaymentReconciliation } from '@medplum/fhirtypes';
import type { Queryable } from '../db/database';
import type { DerivedTable, FhirRepository } from '../fhir/repository';
import { ApiError, ErrorCode, badRequest } from '../core/errors';
import type { MappingSet } from '../mapping/index';
import { facilityIn } from './facility';

export const PAYMENT_METHODS = ['cash', 'mobile_money', 'insurance', 'card'] as const;
const METHOD_SYSTEM = 'https://pont.health/fhir/CodeSystem/payment-method';
/** Methods whose payments carry a reference (a transaction id, an authorisation, a remittance number). */
const NEEDS_REFERENCE = new Set(['mobile_money', 'card', 'insurance']);
/** The time zone of day boundaries when the request names none: Cameroon's. */
export const DEFAULT_TIME_ZONE = 'Africa/Douala';

const CURRENCIES = new Set(Intl.supportedValuesOf('currency'));
export const isCurrency = (code: unknown) => typeof code === 'string' && CURRENCIES.has(code);
export const isTimeZone = (zone: string) => Intl.supportedValuesOf('timeZone').includes(zone) || zone === 'UTC';

const isFacilityPayment = (p: PaymentReconciliation) => (p.detail ?? []).some((d) => (d.type?.coding ?? []).some((c) => c.system === METHOD_SYSTEM));

/**
 * The payments table, following PaymentReconciliation writes of every path. A payment Pont cannot read whole
 * (no facility, an unknown method, a negative amount, a currency that is not ISO 4217) is refused (400).
 */
export function paymentsTable(mappings: MappingSet): DerivedTable {
  return {
    resourceType: 'PaymentReconciliation',
    facilityOf: (r) => (isFacilityPayment(r as PaymentReconciliation) ? facilityIn(mappings.get('payment').readFhir(r).connect) : undefined),
    async sync(sql: Queryable, changes) {
      for (const change of changes) {
        const resource = change.resource as PaymentReconciliation;
        if (change.method === 'DELETE' || !isFacilityPayment(resource)) {
          await sql.query('DELETE FROM payments WHERE payment_id = $1', [resource.id]);
          continue;
        }
        const { connect: p, unread } = mappings.get('payment').readFhir(resource);
        const problems = ['facility_id', 'method', 'amount', 'currency', 'status', 'paid_at'].filter((f) => p[f] == null || unread.includes(f)).map((f) => `${f} is missing or invalid`);
        if (!(PAYMENT_METHODS as readonly unknown[]).includes(p.method)) problems.push(`method must be one of ${PAYMENT_METHODS.join(', ')}`);
        if (p.currency != null && !isCurrency(p.currency)) problems.push(`currency ${String(p.currency)} is not an ISO 4217 code`);
        if (p.currency_due != null && !isCurrency(p.currency_due)) problems.push(`currency_due ${String(p.currency_due)} is not an ISO 4217 code`);
        if (typeof p.amount === 'number' && p.amount < 0) problems.push('amount must not be negative');
        if (typeof p.amount_due === 'number' && p.amount_due < 0) problems.push('amount_due must not be negative');
        if (problems.length) throw badRequest(`PaymentReconciliation/${resource.id} is a facility payment Pont cannot reconcile: ${[...new Set(problems)].join('; ')} (mappings/payment.map.yaml)`);
        await sql.query(
          `INSERT INTO payments (payment_id, facility_id, paid_at, method, amount, currency, amount_due, currency_due, reference, payer, status, updated_at)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, now())
           ON CONFLICT (payment_id) DO UPDATE SET facility_id = $2, paid_at = $3, method = $4, amount = $5, currency = $6, amount_due = $7,
             currency_due = $8, reference = $9, payer = $10, status = $11, updated_at = now()`,
          [resource.id, p.facility_id, p.paid_at, p.method, p.amount, p.currency, p.amount_due, p.currency_due, p.reference, p.payer, p.status],
        );
      }
    },
    async purge(sql: Queryable, ids) {
      await sql.query('DELETE FROM payments WHERE payment_id = ANY($1::text[])', [ids]);
    },
  };
}

export interface ReconciledPayment {
  payment_id: string;
  facility_id: string;
  paid_at: string;
  payer: string | null;
  method: string;
  amount: number;
  currency: string;
  amount_due: number | null;
  reference: string | null;
  status: string;
  reconciled: boolean;
  /** Why it does not reconcile: amount_mismatch, currency_mismatch, missing_reference. */
  problems: string[];
}

/**
 * The day's payments of the caller's organisation (those it wrote, through its clients or agents), in a time
 * zone, with totals per method and per currency (cancelled and entered-in-error payments are listed, not
 * counted) and the payments that do not reconcile flagged.
 */
/** A day's payments of the caller's organisation (those it wrote); an operator's, of every organisation. */
export function readReconciliation(repo: FhirRepository, input: { date: string; timeZone: string; facilityId?: string }): ReturnType<typeof reconciliation> {
  return repo.readFacility(({ lagTolerantSql, access: { operator, organizationId } }) => {
    // Fail closed: a caller of no organisation owns no payments (undefined below would mean every organisation's).
    if (!operator && !organizationId) throw new ApiError(403, ErrorCode.forbidden, 'Payments are read by an organisation: this caller belongs to none');
    // A day's report: from the replica (docs/operators.md "Read replicas").
    return reconciliation(lagTolerantSql, { ...input, organizationId: operator ? undefined : organizationId });
  });
}

export async function reconciliation(sql: Queryable, input: { organizationId: string | undefined; date: string; timeZone: string; facilityId?: string }) {
  const { rows } = await sql.query<{
    payment_id: string;
    facility_id: string;
    paid_at: Date | string;
    payer: string | null;
    method: string;
    amount: string;
    currency: string;
    amount_due: string | null;
    currency_due: string | null;
    reference: string | null;
    status: string;
  }>(
    `SELECT p.payment_id, p.facility_id, p.paid_at, p.payer, p.method, p.amount::text, p.currency, p.amount_due::text, p.currency_due, p.reference, p.status
       FROM payments p JOIN fhir_resources r ON r.resource_type = 'PaymentReconciliation' AND r.id = p.payment_id AND NOT r.deleted
      WHERE p.paid_at >= ($1::date)::timestamp AT TIME ZONE $2 AND p.paid_at < ($1::date + 1)::timestamp AT TIME ZONE $2
        AND ($3::text IS NULL OR p.facility_id = $3) AND ($4::text IS NULL OR r.author_org = $4)
      ORDER BY p.paid_at, p.payment_id`,
    [input.date, input.timeZone, input.facilityId ?? null, input.organizationId ?? null],
  );
  const payments: ReconciledPayment[] = rows.map((r) => {
    const problems: string[] = [];
    if (r.amount_due !== null && Number(r.amount_due) !== Number(r.amount)) problems.push('amount_mismatch');
    if (r.currency_due !== null && r.currency_due !== r.currency) problems.push('currency_mismatch');
    if (NEEDS_REFERENCE.has(r.method) && !r.reference) problems.push('missing_reference');
    return {
      payment_id: r.payment_id,
      facility_id: r.facility_id,
      paid_at: new Date(r.paid_at).toISOString(),
      payer: r.payer,
      method: r.method,
      amount: Number(r.amount),
      currency: r.currency,
      amount_due: r.amount_due === null ? null : Number(r.amount_due),
      reference: r.reference,
      status: r.status,
      reconciled: problems.length === 0,
      problems,
    };
  });
  const counted = payments.filter((p) => p.status === 'active');
  const total = (keyOf: (p: ReconciledPayment) => string) => {
    const sums = new Map<string, { count: number; cents: bigint; sample: ReconciledPayment }>();
    for (const p of counted) {
      const key = keyOf(p);
      const s = sums.get(key) ?? { count: 0, cents: 0n, sample: p };
      s.count++;
      s.cents += BigInt(Math.round(p.amount * 10_000)); // exact sums of numeric(18,4)
      sums.set(key, s);
    }
    return [...sums.values()].map((s) => ({ ...s, amount: Number(s.cents) / 10_000 }));
  };
  return {
    date: input.date,
    time_zone: input.timeZone,
    facility_id: input.facilityId ?? null,
    payments,
    totals: {
      by_method: total((p) => `${p.method}|${p.currency}`).map((t) => ({ method: t.sample.method, currency: t.sample.currency, count: t.count, amount: t.amount })),
      by_currency: total((p) => p.currency).map((t) => ({ currency: t.sample.currency, count: t.count, amount: t.amount })),
    },
    unreconciled: payments.filter((p) => !p.reconciled).length,
  };
}
