import type { CapabilityStatement, CapabilityStatementRestResource } from '@medplum/fhirtypes';
import { allResourceTypes, patientCompartmentParams } from '../core/fhir-definitions';
import { indexedParams } from './indexer';
import { statementHeader } from './statement-header';
import { OPERATIONS } from './term/service';

/** The terminology operations of each type, as the service defines them (docs/fhir.md "Terminology"). */
const TERMINOLOGY: Record<string, string[]> = {};
for (const op of Object.keys(OPERATIONS)) {
  const [type, name] = op.split('/$') as [string, string];
  (TERMINOLOGY[type] ??= []).push(name);
}

/** How reads and searches of CodeSystem, ValueSet and ConceptMap are answered (docs/fhir.md "Terminology"). */
const TERMINOLOGY_READS =
  'With terminology:read, read and search answer the loaded terminology (the current version of each url; search parameters url, version, _id, status, name, title; a code system of more than 1000 concepts without them) and the terminology operations apply; with fhir:read alone, the FHIR store\'s resources of this type. GET metadata?mode=terminology gives the TerminologyCapabilities.';

/** The Bulk Data Access IG (docs/fhir.md "Bulk Data export"). */
const BULK_DATA = 'http://hl7.org/fhir/uv/bulkdata';

/** The Subscriptions R5 Backport IG (docs/fhir.md "Subscriptions"). */
const BACKPORT = 'http://hl7.org/fhir/uv/subscriptions-backport';

/**
 * The Subscription resource as src/routes/subscriptions.ts serves it (backport profile; create, read, delete, search of the
 * organisation's own), with the canonical URL of every topic it takes.
 */
function subscriptionResource(topics: readonly string[]): CapabilityStatementRestResource {
  return {
    type: 'Subscription',
    extension: topics.map((url) => ({ url: `${BACKPORT}/StructureDefinition/capabilitystatement-subscriptiontopic-canonical`, valueCanonical: url })),
    supportedProfile: [`${BACKPORT}/StructureDefinition/backport-subscription`],
    interaction: [{ code: 'create' }, { code: 'read' }, { code: 'delete' }, { code: 'search-type' }],
    searchParam: [
      { name: 'url', definition: 'http://hl7.org/fhir/SearchParameter/Subscription-url', type: 'uri', documentation: 'The channel endpoint (rest-hook)' },
      { name: 'status', definition: 'http://hl7.org/fhir/SearchParameter/Subscription-status', type: 'token' },
    ],
    operation: [
      { name: 'status', definition: `${BACKPORT}/OperationDefinition/backport-subscription-status` },
      { name: 'events', definition: `${BACKPORT}/OperationDefinition/backport-subscription-events` },
      { name: 'get-ws-binding-token', definition: `${BACKPORT}/OperationDefinition/backport-subscription-get-ws-binding-token` },
      { name: 'validate', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-validate' },
    ],
  };
}

/** Generated from what the store really indexes and the routes really serve; `topics`: the canonical URLs of the SubscriptionTopics published. */
export function capabilityStatement(publicUrl: string, topics: readonly string[] = []): CapabilityStatement {
  const resources = allResourceTypes().map((type): CapabilityStatementRestResource => {
    if (type === 'Subscription') return subscriptionResource(topics);
    const params = [...indexedParams(type).values()];
    const references = params.filter((p) => p.type === 'reference');
    const revIncludes: string[] = [];
    for (const other of allResourceTypes())
      for (const p of indexedParams(other).values()) if (p.type === 'reference' && p.targets.includes(type)) revIncludes.push(`${other}:${p.code}`);
    // What the repository lets clients write through /api/fhir/R4: the audit trail is Pont's, consents come
    // through the consent routes (src/fhir/repository.ts, MANAGED_TYPES).
    const writable = type !== 'AuditEvent' && type !== 'Consent';
    const interactions = ['read', 'vread', 'history-instance', 'history-type', 'search-type', ...(writable ? ['create', 'update', 'patch', 'delete'] : [])];
    return {
      type: type as CapabilityStatementRestResource['type'],
      ...(TERMINOLOGY[type] ? { documentation: TERMINOLOGY_READS } : {}),
      interaction: interactions.map((code) => ({ code })) as CapabilityStatementRestResource['interaction'],
      versioning: 'versioned',
      readHistory: true,
      updateCreate: writable,
      conditionalCreate: writable,
      conditionalUpdate: writable,
      conditionalRead: 'full-support',
      conditionalDelete: writable ? 'single' : 'not-supported',
      referencePolicy: ['literal', 'local', 'enforced'],
      searchInclude: references.map((p) => `${type}:${p.code}`),
      searchRevInclude: revIncludes,
      searchParam: [
        { name: '_id', type: 'token' },
        { name: '_lastUpdated', type: 'date' },
        ...params.map((p) => ({ name: p.code, type: p.type, definition: p.definition.url })),
      ] as CapabilityStatementRestResource['searchParam'],
      operation: [
        ...(type === 'Patient'
          ? [
              { name: 'everything', definition: 'http://hl7.org/fhir/OperationDefinition/Patient-everything' },
              { name: 'export', definition: `${BULK_DATA}/OperationDefinition/patient-export` },
            ]
          : []),
        ...(type === 'Group' ? [{ name: 'export', definition: `${BULK_DATA}/OperationDefinition/group-export` }] : []),
        ...(TERMINOLOGY[type] ?? []).map((name) => ({ name, definition: `http://hl7.org/fhir/OperationDefinition/${type}-${name}` })),
        { name: 'validate', definition: 'http://hl7.org/fhir/OperationDefinition/Resource-validate' },
      ],
    };
  });
  const statement: CapabilityStatement = {
    resourceType: 'CapabilityStatement',
    ...statementHeader(),
    implementation: { description: 'Pont FHIR R4 store', url: `${publicUrl}/api/fhir/R4` },
    fhirVersion: '4.0.1',
    instantiates: [`${BULK_DATA}/CapabilityStatement/bulk-data`, `${BACKPORT}/CapabilityStatement/backport-subscription-server-r4`],
    format: ['application/fhir+json', 'json'],
    rest: [
      {
        mode: 'server',
        security: {
          cors: false,
          // SMART Backend Services (client-confidential-asymmetric): ${publicUrl}/api/fhir/R4/.well-known/smart-configuration.
          service: [
            {
              coding: [{ system: 'http://terminology.hl7.org/CodeSystem/restful-security-service', code: 'SMART-on-FHIR', display: 'SMART-on-FHIR' }],
              text: 'OAuth 2.0 client credentials, with a SMART Backend Services client assertion (private_key_jwt) or a client secret',
            },
          ],
          description: `OAuth 2.0 client credentials: POST ${publicUrl}/api/v1/connect/auth/token (SMART configuration: ${publicUrl}/api/fhir/R4/.well-known/smart-configuration); Bearer JWT on every request except metadata.`,
          extension: [
            {
              url: 'http://fhir-registry.smarthealthit.org/StructureDefinition/oauth-uris',
              extension: [{ url: 'token', valueUri: `${publicUrl}/api/v1/connect/auth/token` }],
            },
          ],
        },
        resource: resources,
        interaction: [{ code: 'transaction' }, { code: 'batch' }],
        operation: [{ name: 'export', definition: `${BULK_DATA}/OperationDefinition/export` }],
        compartment: patientCompartmentParams().size ? ['http://hl7.org/fhir/CompartmentDefinition/patient'] : [],
      },
    ],
  };
  return statement;
}
