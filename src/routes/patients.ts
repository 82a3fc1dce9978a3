import { z } from 'zod';
import { isCountryCode } from '../core/countries';
import { HEALTH_ID_LENGTH, HealthIdErrorCode } from '../healthid/healthid';
import { defineRoute, type RouteSpec } from '../http/routes';
import { ErrorSchema } from '../http/openapi';
import type { Services } from '../http/services';
import { DATE, isFhirDate, NOT_A_CALENDAR_DAY } from '../core/fhir-dates';
import type { MappingSet } from '../mapping/types';
import { normaliseName } from '../core/normalise';
import { PatientService, type Demographics, type StatedReason } from '../patients/service';

const CONNECT = '/api/v1/connect';

/** The profile read accepts both spellings of its scope that the published interface uses. */
export const PROFILE_READ_SCOPES = ['patients:profile:read', 'patient:profile:read'];

const healthIdDescription =
  `Health ID: ISO 3166-1 alpha-2 country code, 10 digits, 2 check digits (${HEALTH_ID_LENGTH} characters, e.g. CM482930174629); ` +
  'the check digits make the whole ID, letters read as numbers A=10 … Z=35, equal 1 modulo 97 (ISO 7064 MOD 97-10, as in IBAN).';
// Length only here: format and checksum are checked afterwards, to answer with their own error codes.
const HealthIdInput = z.string().max(64).describe(healthIdDescription);

const Name = z
  .string()
  .trim()
  .min(1)
  .max(100)
  .refine((name) => normaliseName(name) !== '', 'must contain a letter or a digit');

// The day, or the month or year alone when that is all anyone knows (born about 1960): matched at the precision
// given, as the patient's birth date is recorded (docs/integrators.md "Patients").
const DateOfBirth = z
  .string()
  .regex(DATE, 'must be a date: YYYY-MM-DD, or YYYY-MM or YYYY when the day or month is not known')
  .refine(isFhirDate, NOT_A_CALENDAR_DAY)
  .refine((date) => date <= new Date().toISOString().slice(0, date.length), 'must not be in the future')
  .refine((date) => date >= '1880', 'must be after 1880')
  .describe('YYYY-MM-DD, or YYYY-MM or YYYY when the day or month is not known');

const Reason = {
  purpose: z.string().max(500).nullish().describe('Reason for the lookup; written to the audit trail'),
  external_reference: z.string().max(200).nullish().describe("Caller's own patient id; written to the audit trail"),
};

const ResolveBody = z
  .object({
    health_id: HealthIdInput.nullish().describe(`Known Health ID to look up (never creates a patient). ${healthIdDescription}`),
    first_name: Name.nullish().describe('Required when no health_id'),
    last_name: Name.nullish(),
    date_of_birth: DateOfBirth.nullish(),
    country_code: z
      .string()
      .length(2)
      .toUpperCase()
      .refine(isCountryCode, 'must be an ISO 3166-1 alpha-2 country code')
      .nullish()
      .describe('Country that issues a new Health ID (its prefix); default CM'),
    sex: z.enum(['male', 'female', 'other']).nullish(),
    phone_number: z
      .string()
      .regex(/^\+?[0-9][0-9 ().-]{3,30}$/, 'must be a phone number such as +237 6 12 34 56 78')
      .nullish()
      .describe('Stored only when a patient is created'),
    ...Reason,
  })
  .refine((body) => body.health_id != null || body.first_name != null, {
    message: 'first_name is required when no health_id is given',
    path: ['first_name'],
  })
  .meta({ id: 'HealthIdResolveRequest' });

/** What resolve and verify answer: the patient is the registry's Health ID and the demographics map's fields. */
function lookUpSchemas(maps: MappingSet) {
  const PatientDemographics = z
    .object({ health_id: z.string() })
    .extend(maps.get('patient-demographics').shape().shape)
    .meta({ id: 'PatientDemographics', description: 'Basic demographics of a registered patient (no contact details; mappings/patient-demographics.map.yaml); null where unknown.' });
  const ResolveResponse = z
    .object({
      status: z.enum(['found', 'created', 'not_found']),
      health_id: z.string(),
      patient: PatientDemographics.optional().describe('Absent when not_found'),
    })
    .meta({ id: 'HealthIdResolveResponse' });
  const VerifyResponse = z.object({ valid: z.literal(true), health_id: z.string(), patient: PatientDemographics }).meta({ id: 'HealthIdVerifyResponse' });
  return { ResolveResponse, VerifyResponse };
}

const PatientProfile = z
  .object({ health_id: z.string() })
  .loose()
  .meta({ id: 'PatientProfile', description: 'The patient in the Connect shape of mappings/patient-profile.map.yaml.' });

const invalidHealthId = {
  description: `Malformed Health ID (${HealthIdErrorCode.malformed}), unknown country prefix (${HealthIdErrorCode.unknownCountry}), wrong check digits (${HealthIdErrorCode.checksum}), or another invalid field (VALIDATION_FAILED)`,
  schema: ErrorSchema,
};
const notRegistered = { description: `Valid Health ID that no patient holds (${HealthIdErrorCode.notRegistered})`, schema: ErrorSchema };

function reasonOf(input: { purpose?: string | null; external_reference?: string | null }): StatedReason {
  return { purpose: input.purpose ?? undefined, external_reference: input.external_reference ?? undefined };
}

export function patientRoutes(services: Services): RouteSpec[] {
  const patients = new PatientService({
    config: services.config,
    profileMapping: () => services.mappings.get('patient-profile'),
    demographicsMapping: () => services.mappings.get('patient-demographics'),
  });
  // The maps of the request (a reload changes them).
  const live = services.mappings.derived(lookUpSchemas);

  return [
    defineRoute({
      method: 'post',
      path: `${CONNECT}/patients/resolve`,
      operationId: 'resolvePatient',
      summary: 'Resolve a patient to a Health ID (find, or register)',
      description:
        'With `health_id`: `found` when registered, `not_found` (200) when valid but unregistered; never creates. ' +
        'With demographics only: `found` when a patient with the same normalised first name, last name, date of birth and sex ' +
        'is registered (see docs/integrators.md "Patients"), otherwise a new Patient and Health ID are created (201, `created`). ' +
        '`purpose` and `external_reference` go into the AuditEvent.',
      tags: ['Connect', 'Patients'],
      security: { kind: 'client', scope: 'health_id:verify' },
      body: ResolveBody,
      get responses() {
        return {
          200: { description: 'found or not_found', schema: live().ResolveResponse },
          201: { description: 'created: new patient and Health ID', schema: live().ResolveResponse },
          422: invalidHealthId,
        };
      },
      async handler({ body, repo }) {
        const reason = reasonOf(body);
        if (body.health_id != null) {
          return { body: await patients.resolveByHealthId(repo, body.health_id, reason) };
        }
        const person: Demographics = {
          first_name: body.first_name!,
          last_name: body.last_name ?? undefined,
          date_of_birth: body.date_of_birth ?? undefined,
          sex: body.sex ?? undefined,
          country_code: body.country_code ?? 'CM',
          phone_number: body.phone_number ?? undefined,
        };
        const result = await patients.resolveByDemographics(repo, person, reason);
        return { status: result.status === 'created' ? 201 : 200, body: result };
      },
    }),

    defineRoute({
      method: 'get',
      path: `${CONNECT}/patients/verify/{health_id}`,
      operationId: 'verifyHealthId',
      summary: 'Verify a Health ID: checksum, then registration',
      description: 'Records the event `health_id.verified` and an AuditEvent.',
      tags: ['Connect', 'Patients'],
      security: { kind: 'client', scope: 'health_id:verify' },
      params: z.object({ health_id: HealthIdInput }),
      query: z.object(Reason),
      get responses() {
        return {
          200: { description: 'Registered', schema: live().VerifyResponse },
          404: notRegistered,
          422: invalidHealthId,
        };
      },
      async handler({ params, query, repo }) {
        return { body: await patients.verify(repo, params.health_id, reasonOf(query)) };
      },
    }),

    defineRoute({
      method: 'get',
      path: `${CONNECT}/patient/search`,
      operationId: 'searchPatient',
      summary: "A patient's profile by Health ID",
      tags: ['Connect', 'Patients'],
      security: { kind: 'client', scope: PROFILE_READ_SCOPES },
      query: z.object({ health_id: HealthIdInput, ...Reason }),
      responses: {
        200: { description: 'The patient profile', schema: PatientProfile },
        404: notRegistered,
        422: invalidHealthId,
      },
      async handler({ query, repo }) {
        return { body: await patients.profile(repo, query.health_id, reasonOf(query)) };
      },
    }),
  ];
}
