import type { Context } from 'koa';
import { z } from 'zod';
import { TERMINOLOGY_SCOPE } from '../core/scopes';
import { readBody } from '../http/body';
import { defineRoute, type RouteSpec } from '../http/routes';
import type { Services } from '../http/services';
import { FHIR_BASE_PATH as FHIR_BASE } from '../fhir/service';
import { fromParameters, fromQuery, type OpInput } from '../fhir/term/params';
import { OPERATIONS, type OperationName } from '../fhir/term/service';

const FHIR_JSON = 'application/fhir+json';

/** What each operation does, for the OpenAPI document (docs/fhir.md "Terminology" says more). */
const SUMMARIES: Record<OperationName, string> = {
  'CodeSystem/$lookup': "$lookup: a code's display, definition, designations and properties, its parents and children",
  'CodeSystem/$validate-code': '$validate-code: is the code in the code system (and the display one of its displays)?',
  'CodeSystem/$subsumes': '$subsumes: how codeA and codeB are related in the is-a hierarchy',
  'ValueSet/$expand': "$expand: a page of the value set's codes (filter, activeOnly, offset, count); the value set loaded, or given (valueSet, POST)",
  'ValueSet/$validate-code': '$validate-code: is the code in the value set (loaded, or given: valueSet, POST)?',
  'ConceptMap/$translate': '$translate: the codes a code maps to in the loaded concept maps (group.unmapped honoured; reverse=true: the codes that map to it)',
};

const ANSWERS: Record<OperationName, string> = {
  'CodeSystem/$lookup': 'Parameters: name, version, display, definition, designation, property (parent, child, inactive, …)',
  'CodeSystem/$validate-code': 'Parameters: result, message, display',
  'CodeSystem/$subsumes': 'Parameters: outcome (equivalent, subsumes, subsumed-by, not-subsumed)',
  'ValueSet/$expand': 'ValueSet with expansion (total, offset, contains)',
  'ValueSet/$validate-code': 'Parameters: result, message, display',
  'ConceptMap/$translate': 'Parameters: result, message, match (equivalence, concept, source)',
};

const ParametersSchema = { type: 'object', required: ['resourceType'], properties: { resourceType: { const: 'Parameters' }, parameter: { type: 'array', maxItems: 100 } } };
const ResourceSchema = { type: 'object', required: ['resourceType'], properties: { resourceType: { type: 'string' } } };
const OutcomeSchema = { type: 'object', required: ['resourceType'], properties: { resourceType: { const: 'OperationOutcome' }, issue: { type: 'array' } } };

/**
 * The FHIR terminology operations (R4 CodeSystem/$lookup, $validate-code, $subsumes, ValueSet/$expand,
 * $validate-code, ConceptMap/$translate), type and instance level, GET (query parameters) and POST (a Parameters
 * body), over what `pont terminology load` loaded. Scope `terminology:read`; no consent (no patient data).
 * Mounted before the FHIR routes: `CodeSystem/$lookup` would match `/{type}/{id}`.
 */
export function terminologyRoutes(services: Services): RouteSpec[] {
  const routes: RouteSpec[] = [];
  for (const op of Object.keys(OPERATIONS) as OperationName[]) {
    const [type, name] = op.split('/') as [string, string];
    const known = new Set<string>(OPERATIONS[op]);
    const camel = name.slice(1).replace(/-(\w)/g, (_, c: string) => c.toUpperCase());
    const opId = `terminology${type}${camel[0]!.toUpperCase()}${camel.slice(1)}`;
    for (const instance of [false, true]) {
      const path = instance ? `${FHIR_BASE}/${type}/{id}/${name}` : `${FHIR_BASE}/${type}/${name}`;
      const id = (ctx: Context) => (instance ? String(ctx.params.id) : undefined);
      const common = {
        tags: ['FHIR Terminology'],
        fhir: true,
        security: { kind: 'client' as const, scope: TERMINOLOGY_SCOPE },
        group: 'fhir',
        ...(instance ? { params: z.object({ id: z.string().describe(`The id of a loaded ${type}`) }) } : {}),
        responses: {
          200: { description: ANSWERS[op], schema: name === '$expand' ? ResourceSchema : ParametersSchema, contentType: FHIR_JSON },
          400: { description: 'OperationOutcome: a parameter is missing, unknown or malformed', schema: OutcomeSchema, contentType: FHIR_JSON },
          404: { description: `OperationOutcome: the ${type} (or the code looked up) is not loaded`, schema: OutcomeSchema, contentType: FHIR_JSON },
        },
      };
      const description = `${instance ? `The ${type} with this id. ` : ''}Parameters as R4 defines them: ${OPERATIONS[op].join(', ')}. See docs/fhir.md "Terminology". Needs ${TERMINOLOGY_SCOPE}.`;
      const run = async (ctx: Context, input: OpInput) => ({
        status: 200,
        contentType: FHIR_JSON,
        body: await services.terminology.run(op, input, id(ctx)),
      });
      routes.push(
        defineRoute({
          ...common,
          method: 'get',
          path,
          operationId: `${opId}${instance ? 'Instance' : ''}`,
          summary: SUMMARIES[op],
          description,
          extraQueryDocs: OPERATIONS[op].filter((p) => p !== 'valueSet').map((p) => ({ name: p, description: `R4 ${op} parameter ${p}`, schema: { type: 'string' } })),
          handler: async ({ ctx }) => run(ctx, fromQuery(ctx.query as Record<string, string | string[] | undefined>, known)),
        }),
        defineRoute({
          ...common,
          method: 'post',
          path,
          operationId: `${opId}${instance ? 'Instance' : ''}Post`,
          summary: `${SUMMARIES[op]} (a Parameters body)`,
          description,
          rawBody: { schema: ParametersSchema, contentTypes: [FHIR_JSON, 'application/json'] },
          handler: async ({ ctx }) => {
            const body = await readBody(ctx, services.config.maxBodyBytes);
            const input = fromParameters(body, known);
            for (const [k, v] of fromQuery(ctx.query as Record<string, string | string[] | undefined>, known)) input.set(k, [...(input.get(k) ?? []), ...v]);
            return run(ctx, input);
          },
        }),
      );
    }
  }
  return routes;
}
