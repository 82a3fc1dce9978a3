import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Bundle, Patient, Resource } from '@medplum/fhirtypes';
import { x as extract } from 'tar';
import { z } from 'zod';
import { createAgent } from '../auth/agents';
import { createClient } from '../auth/clients';
import type { ClientPrincipal } from '../core/principal';
import { SCOPES, type Scope } from '../core/scopes';
import { ConsentService } from '../consents/service';
import type { Queryable } from '../db/database';
import { processBundle } from '../fhir/bundle';
import { hashKey, uuidV5 } from '../core/hash';
import { HEALTH_ID_SYSTEM } from '../healthid/healthid';
import { ApiError, ErrorCode } from '../core/errors';
import { BLOOD_COMPONENTS, BLOOD_GROUPS } from '../inventory/blood';
import { DEFAULT_TIME_ZONE } from '../inventory/payments';
import { putStock } from '../inventory/pharmacy';
import type { Services } from '../http/services';

/** The demo organisation and facility: a reset touches nothing else. */
export const DEMO_ORG = 'org-demo';
export const DEMO_FACILITY = 'fac-demo';
/** How many of the sample patients the demo holds (the smallest records, for a quick reset). */
const DEMO_PATIENTS = 5;
const SAMPLE = fileURLToPath(new URL('../../samples/synthea-r4-50-patients.tar.gz', import.meta.url));

/**
 * The scopes of the demo's first client: what a sandbox integrator needs, which is every scope but the operator's
 * and the ones that reach patients outside the demo: the audit trail (`audit:read`), break-glass
 * (`emergency:access`) and granting consent (`consents:write`: the reset itself seeds the demo patients' consents).
 */
export const SANDBOX_SCOPES: Scope[] = SCOPES.filter((s) => !['audit:read', 'emergency:access', 'consents:write'].includes(s));
/** The scopes of the demo's second client: an integrator that reads records with consent. */
const READER_SCOPES: Scope[] = ['health_id:verify', 'patients:read', 'patient:diagnostics:read', 'labs:read', 'prescriptions:read', 'consents:read', 'blood:inventory:read'];

/** The demo's copy of a sample id: the same on every reset, never the sample's own (an operator may have imported it). */
const demoId = (uuid: string) => uuidV5('pont-demo', uuid.toLowerCase());

/** The demo's sample bundles as text, read once per process (the same on every reset). */
let sampleTexts: string[] | undefined;

/** The demo's sample bundles: the smallest records of the repository's Synthea sample, with the demo's ids. */
function sampleBundles(): Bundle[] {
  sampleTexts ??= (() => {
    const dir = mkdtempSync(join(tmpdir(), 'pont-demo-'));
    try {
      extract({ file: SAMPLE, cwd: dir, sync: true });
      return readdirSync(dir)
        .filter((f) => f.endsWith('.json'))
        .map((f) => readFileSync(join(dir, f), 'utf8'))
        .sort((a, b) => a.length - b.length || (a < b ? -1 : 1))
        .slice(0, DEMO_PATIENTS)
        .map((t) => t.replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, demoId));
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  })();
  return sampleTexts.map((t) => JSON.parse(t) as Bundle);
}

/** What a reset removed (the answer's `replaced`, described in the OpenAPI document), and what it kept. */
export const ReplacedSchema = z.object({
  fhir_resources: z.number().int().describe('FHIR resources the demo organisation wrote, every version removed (its audit trail stays)'),
  clients: z
    .number()
    .int()
    .describe('The clients the demo seeded, removed: every access token they were issued is refused from the next request. Clients made for the demo organisation in the portal or with the CLI are kept'),
  bridge_agents: z.number().int().describe('The Bridge agent the demo seeded, removed (agents made in the portal or with the CLI are kept)'),
  patient_tokens: z.number().int().describe("Demo patients' mobile tokens (pat_) and pairing codes ended"),
  events: z.number().int().describe('Events of the demo organisation and its patients removed, with their webhook deliveries'),
  webhook_deliveries: z.number().int().describe('Webhook deliveries of those events removed (pending ones are not sent)'),
  webhook_subscriptions_kept: z
    .number()
    .int()
    .describe("The demo organisation's webhook subscriptions, kept as they are (an integrator's own set-up): they hear the fresh demo's events like any write's"),
});
export type Replaced = z.infer<typeof ReplacedSchema>;

/**
 * Removes what the demo made and the demo organisation's data: the FHIR resources it wrote (every version and index
 * row, and the rows every registered derived table keeps for them: FhirService.purge), its events and their
 * deliveries, the replay records of its writes (idempotency keys, Bridge batches), and the clients and agent a reset
 * seeded (`demo_seeded`, migration 029). Hard deletes: the demo is a sandbox, not a record. Kept: what a person made
 * for the demo organisation in the portal or with the CLI (clients, a SMART client too, agents, webhook
 * subscriptions: theirs, not demo data, whatever their names), and the audit trail (AuditEvents, authored by the
 * organisation whose accesses they record: what the demo's clients did stays on record). Answers what it removed.
 */
async function wipe(sql: Queryable, fhir: Services['fhir']): Promise<Replaced> {
  const { rows } = await sql.query<{ rid: string; resource_type: string; id: string }>(
    `SELECT rid, resource_type, id FROM fhir_resources WHERE author_org = $1 AND resource_type <> 'AuditEvent'`,
    [DEMO_ORG],
  );
  const rids = rows.map((r) => r.rid);
  const patients = rows.filter((r) => r.resource_type === 'Patient').map((r) => r.id);
  const removed = async (statement: string, params: unknown[]) => (await sql.query(statement, params)).rowCount;
  await sql.query('DELETE FROM health_ids WHERE patient_id = ANY($1::text[])', [patients]);
  let patientTokens = 0;
  for (const table of ['mobile_pairing_codes', 'mobile_tokens']) patientTokens += await removed(`DELETE FROM ${table} WHERE patient_id = ANY($1::text[])`, [patients]);
  await sql.query('DELETE FROM emergency_access WHERE organization_id = $1', [DEMO_ORG]);
  // The consents granted to the demo organisation are among them (a Consent counts as written by its grantee, src/services.ts).
  const resources = await fhir.purge(sql, rids);
  const events = `SELECT id FROM events WHERE organization_id = $1 OR patient_id = ANY($2::text[])`;
  // Lock the deliveries first: a delivery worker recording an attempt on one of them meanwhile would otherwise commit
  // between the two deletes below and break the second (a kept subscription's deliveries are being sent as we go).
  await sql.query(`SELECT id FROM webhook_deliveries WHERE event_id IN (${events}) FOR UPDATE`, [DEMO_ORG, patients]);
  await sql.query(`DELETE FROM webhook_delivery_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE event_id IN (${events}))`, [DEMO_ORG, patients]);
  const deliveries = await removed(`DELETE FROM webhook_deliveries WHERE event_id IN (${events})`, [DEMO_ORG, patients]);
  const eventCount = await removed(`DELETE FROM events WHERE id IN (${events})`, [DEMO_ORG, patients]);
  await sql.query('DELETE FROM idempotency_keys WHERE client_id IN (SELECT client_id FROM oauth_clients WHERE organization_id = $1)', [DEMO_ORG]);
  await sql.query('DELETE FROM bridge_batches WHERE agent_id IN (SELECT agent_id FROM bridge_agents WHERE organization_id = $1)', [DEMO_ORG]);
  const agents = await removed('DELETE FROM bridge_agents WHERE organization_id = $1 AND demo_seeded', [DEMO_ORG]);
  const clients = await removed('DELETE FROM oauth_clients WHERE organization_id = $1 AND demo_seeded', [DEMO_ORG]);
  const { rows: kept } = await sql.query<{ n: number }>('SELECT count(*)::int AS n FROM webhook_subscriptions WHERE organization_id = $1 AND deleted_at IS NULL', [DEMO_ORG]);
  return { fhir_resources: resources, clients, bridge_agents: agents, patient_tokens: patientTokens, events: eventCount, webhook_deliveries: deliveries, webhook_subscriptions_kept: kept[0]!.n };
}

/** Today's date in a time zone (YYYY-MM-DD). */
const todayIn = (timeZone: string) => new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(new Date());

/** 409 to a reset asked for while another runs: resets are serialised, never queued (each is seconds of work). */
const busy = () =>
  new ApiError(409, ErrorCode.conflict, 'A demo reset is already running; retry shortly', { extra: { retry_after: RETRY_AFTER_S }, headers: { 'Retry-After': String(RETRY_AFTER_S) } });
const RETRY_AFTER_S = 5;

/** The Pont instances of this process running a reset now (tests run several in one process). */
const running = new WeakSet<Services>();

/**
 * POST /api/demo/reset: wipes the demo organisation (wipe: what it seeded and its data, never what a person made) and
 * seeds it afresh, in one transaction: two clients (one with the sandbox integrator's scopes), a Bridge agent, the
 * sample patients with their Health IDs and records, full-record consents, blood units, pharmacy stock and today's
 * payments. Answers what it removed (`replaced`; the webhook subscriptions, and the clients and agents people made,
 * are kept) and what it made. One reset at a time: another asked for meanwhile, in this process or any other on the
 * database, is refused with 409 at once.
 * `admit` (the rate limit) runs once this process is not busy, before any work.
 */
export async function resetDemo(services: Services, admit: () => Promise<void> = async () => undefined): Promise<Record<string, unknown>> {
  // This process first (on PGlite a second transaction would only wait for the first, then redo the work)…
  if (running.has(services)) throw busy();
  running.add(services);
  try {
    await admit();
    return await reset(services);
  } finally {
    running.delete(services);
  }
}

async function reset(services: Services): Promise<Record<string, unknown>> {
  const bundles = sampleBundles();
  const principal: ClientPrincipal = { kind: 'client', clientId: 'demo-reset', organizationId: DEMO_ORG, facilityId: DEMO_FACILITY, scopes: [...SCOPES], allPatients: true };
  const repo = services.fhir.repository({ principal, channel: 'system', operation: 'demoReset' });
  const consents = new ConsentService(services.mappings);
  const seeded = await repo.transaction(async (sql) => {
    // …then every process on the database: the lock ends with the transaction.
    const { rows } = await sql.query<{ locked: boolean }>('SELECT pg_try_advisory_xact_lock($1::bigint) AS locked', [hashKey('demo-reset')]);
    if (!rows[0]!.locked) throw busy();
    const replaced = await wipe(sql, services.fhir);
    // Marked as the demo's: the next reset removes these, and no client or agent a person made.
    const demoMade = { demoSeeded: true };
    const full = await createClient(sql, { name: 'Demo integrator (sandbox scopes)', organizationId: DEMO_ORG, facilityId: DEMO_FACILITY, scopes: SANDBOX_SCOPES }, demoMade);
    const reader = await createClient(sql, { name: 'Demo records reader', organizationId: DEMO_ORG, facilityId: DEMO_FACILITY, scopes: READER_SCOPES }, demoMade);
    const agent = await createAgent(sql, { organizationId: DEMO_ORG, facilityId: DEMO_FACILITY }, demoMade);

    const sample = bundles.flatMap((b) => b.entry ?? []);
    const samplePatients = sample.map((e) => e.resource).filter((r): r is Patient => r?.resourceType === 'Patient');
    const profileOf = (patient: Patient) => services.mappings.get('patient-profile').readFhir(patient).connect;
    // Blood units: every group and component, a few expiring within the week.
    const units: Resource[] = [];
    const day = 86_400_000;
    BLOOD_GROUPS.forEach((group, g) =>
      BLOOD_COMPONENTS.forEach((component, c) => {
        const n = 1 + ((g + c) % 3);
        for (let i = 0; i < n; i++)
          units.push(
            services.mappings.get('blood-unit').toFhir({
              id: demoId(`00000000-0000-0000-0000-${String(g * 100 + c * 10 + i).padStart(12, '0')}`),
              facility_id: DEMO_FACILITY,
              blood_group: group,
              component,
              status: 'available',
              units: 1,
              collected_at: new Date(Date.now() - 10 * day).toISOString(),
              expires_at: new Date(Date.now() + (i === 0 ? 3 : 30) * day).toISOString(),
            }),
          );
      }),
    );
    // Today's payments, in the facility's time zone: one of them does not reconcile (amount short).
    const today = todayIn(DEFAULT_TIME_ZONE);
    const payments = (
      [
        ['cash', 2500, 2500, null],
        ['mobile_money', 15000, 15000, 'MP-DEMO-0001'],
        ['mobile_money', 9000, 10000, 'MP-DEMO-0002'],
        ['insurance', 30000, 30000, 'INS-DEMO-77'],
        ['card', 12000, 12000, 'AUTH-DEMO-5'],
      ] as const
    ).map(([method, amount, due, reference], i) =>
      services.mappings.get('payment').toFhir({
        id: demoId(`00000000-0000-0000-0001-${String(i).padStart(12, '0')}`),
        facility_id: DEMO_FACILITY,
        payer: profileOf(samplePatients[i % samplePatients.length]!).first_name,
        method,
        amount,
        currency: 'XAF',
        amount_due: due,
        currency_due: 'XAF',
        reference,
        status: 'active',
        paid_at: new Date(Math.min(Date.now(), Date.parse(`${today}T08:00:00+01:00`) + i * 3_600_000)).toISOString(),
        paid_on: today,
      }),
    );
    // One write of everything (the sample records, blood units and payments): one validation fan-out over the check
    // workers and one batch of statements, not one per sample bundle.
    const own = [...units, ...payments].map((resource) => ({ resource, request: { method: 'PUT' as const, url: `${resource.resourceType}/${resource.id}` } }));
    await processBundle(repo, { resourceType: 'Bundle', type: 'transaction', entry: [...sample, ...own] }, { returnResources: false });

    const inAYear = new Date(Date.now() + 365 * 86_400_000).toISOString();
    const patients: Array<{ health_id: string; patient_id: string; first_name: unknown; last_name: unknown; date_of_birth: unknown }> = [];
    for (const { id } of samplePatients) {
      const patient = await repo.read<Patient>('Patient', id!, { audit: false });
      const healthId = patient.identifier!.find((i) => i.system === HEALTH_ID_SYSTEM)!.value!;
      await consents.grant(repo, DEMO_ORG, healthId, { consent_type: 'full_record', expires_at: inAYear, purpose: 'demo' });
      const profile = profileOf(patient);
      patients.push({ health_id: healthId, patient_id: id!, first_name: profile.first_name, last_name: profile.last_name, date_of_birth: profile.date_of_birth });
    }

    // Pharmacy stock: three lines, one below its reorder level.
    const rxnorm = 'http://www.nlm.nih.gov/research/umls/rxnorm';
    const stock = await putStock(repo, services.mappings, DEMO_FACILITY, [
      { medication: { code: '308182', code_system: rxnorm, display: 'Amoxicillin 250 MG Oral Capsule' }, quantity_on_hand: 400, unit: 'capsules', reorder_level: 200, batches: [{ lot: 'AMX-D1', expires_on: '2027-06-30', quantity: 300 }, { lot: 'AMX-D2', expires_on: '2027-01-31', quantity: 100 }] },
      { medication: { code: '198440', code_system: rxnorm, display: 'Acetaminophen 500 MG Oral Tablet' }, quantity_on_hand: 60, unit: 'tablets', reorder_level: 100 },
      { medication: { code: '310798', code_system: rxnorm, display: 'Hydrochlorothiazide 25 MG Oral Tablet' }, quantity_on_hand: 900, unit: 'tablets', reorder_level: 300 },
    ]);

    return {
      environment: services.config.environment,
      organization_id: DEMO_ORG,
      facility_id: DEMO_FACILITY,
      clients: [
        { name: 'Demo integrator (sandbox scopes)', client_id: full.client_id, client_secret: full.client_secret, scopes: SANDBOX_SCOPES },
        { name: 'Demo records reader', client_id: reader.client_id, client_secret: reader.client_secret, scopes: READER_SCOPES },
      ],
      bridge_agent: agent,
      patients,
      replaced,
      seeded: { fhir_resources: sample.length, consents: patients.length, blood_units: units.length, pharmacy_stock_lines: stock.lines, payments: payments.length, payments_date: today, time_zone: DEFAULT_TIME_ZONE },
      token_request: { method: 'POST', path: '/api/v1/connect/auth/token', body: { grant_type: 'client_credentials', client_id: full.client_id, client_secret: '<client_secret>' } },
    };
  });
  // The demo clients it removed are refused on this process's next request: its client cache hears them first.
  await services.access.caughtUp();
  return seeded;
}
