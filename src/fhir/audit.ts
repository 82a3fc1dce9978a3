import type { Context } from 'koa';
import { toTypedValue } from '@medplum/core';
import type { Resource } from '@medplum/fhirtypes';
import { auditCaller, recordAudit, type AuditRecord } from '../audit/audit';
import type { Queryable } from '../db/database';
import { patientCompartmentParams } from './definitions';
import { indexedParams, referenceTarget } from './indexer';
import type { FhirStore } from './store';

/** The most patients one AuditEvent names; a larger search says how many more in its description. */
const MAX_PATIENTS_PER_EVENT = 50;

/** The patients whose data `resources` are: Patients themselves and members of their compartment. */
export function patientsOf(resources: Resource[], localBase: string): string[] {
  const ids = new Set<string>();
  const compartment = patientCompartmentParams();
  for (const r of resources) {
    if (r.resourceType === 'Patient' && r.id) {
      ids.add(r.id);
      continue;
    }
    const codes = compartment.get(r.resourceType);
    if (!codes) continue;
    const typed = toTypedValue(r);
    const params = indexedParams(r.resourceType);
    for (const code of codes) {
      for (const tv of params.get(code)?.evaluate(typed) ?? []) {
        const ref = (tv.value as { reference?: string } | undefined)?.reference;
        const target = ref ? referenceTarget(ref, localBase) : undefined;
        if (target?.[0] === 'Patient') ids.add(target[1]);
      }
    }
  }
  return [...ids];
}

/**
 * Writes the AuditEvent of a FHIR interaction that touched patient data (nothing when it touched
 * none, and nothing for reads of the audit trail itself). Pass `tx` for writes, so the record
 * commits with the change.
 */
export async function auditFhirAccess(
  store: FhirStore,
  ctx: Context,
  operation: string,
  action: AuditRecord['action'],
  resources: Resource[],
  tx?: Queryable,
): Promise<void> {
  if (resources.every((r) => r.resourceType === 'AuditEvent')) return;
  const patients = patientsOf(resources, store.baseUrl());
  if (!patients.length) return;
  const named = patients.slice(0, MAX_PATIENTS_PER_EVENT);
  const record: AuditRecord = {
    caller: auditCaller(ctx),
    operation,
    action,
    outcome: 'success',
    outcomeDescription: `${resources.length} resource(s) of ${patients.length} patient(s)${patients.length > named.length ? `; first ${named.length} named` : ''}`,
    patient: { id: named[0] },
    otherPatients: named.slice(1),
    purpose: ctx.get('x-purpose-of-use') || undefined,
  };
  if (tx) await recordAudit(tx, store, record);
  else await store.db.transaction((t) => recordAudit(t, store, record));
}
