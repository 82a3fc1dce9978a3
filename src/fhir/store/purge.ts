import type { Queryable } from '../../db/database';

/** Every table keyed by a resource's rid besides fhir_resources itself: its index rows, links and earlier versions. */
const ROWS_OF_A_RESOURCE = ['fhir_idx_token', 'fhir_idx_string', 'fhir_idx_date', 'fhir_idx_number', 'fhir_idx_quantity', 'fhir_idx_reference', 'fhir_idx_uri', 'fhir_links', 'fhir_resource_versions'];

/** A table that keeps rows for resources of one type (a DerivedTable, src/fhir/repository.ts): told of each purge. */
export interface PurgedRows {
  resourceType: string;
  purge(sql: Queryable, ids: string[]): Promise<void>;
}

/**
 * Removes resources from the store outright, every version and index row, and the rows `derived` tables keep for
 * them (a hard delete, not a FHIR delete: the demo reset, and retention of the audit trail's AuditEvents). Callers
 * go through FhirService.purge, which passes the derived tables registered at composition. Returns how many
 * resources it removed.
 */
export async function purgeResources(sql: Queryable, rids: string[], derived: readonly PurgedRows[]): Promise<number> {
  if (!rids.length) return 0;
  if (derived.length) {
    const { rows } = await sql.query<{ resource_type: string; id: string }>('SELECT resource_type, id FROM fhir_resources WHERE rid = ANY($1::bigint[])', [rids]);
    for (const table of derived) {
      const ids = rows.filter((r) => r.resource_type === table.resourceType).map((r) => r.id);
      if (ids.length) await table.purge(sql, ids);
    }
  }
  for (const table of ROWS_OF_A_RESOURCE) await sql.query(`DELETE FROM ${table} WHERE rid = ANY($1::bigint[])`, [rids]);
  return (await sql.query('DELETE FROM fhir_resources WHERE rid = ANY($1::bigint[])', [rids])).rowCount;
}

/** purgeResources, for the resources of `type` with these ids (those that exist). */
export async function purgeResourcesById(sql: Queryable, type: string, ids: string[], derived: readonly PurgedRows[]): Promise<number> {
  const { rows } = await sql.query<{ rid: string }>('SELECT rid FROM fhir_resources WHERE resource_type = $1 AND id = ANY($2::text[])', [type, ids]);
  return purgeResources(
    sql,
    rows.map((r) => r.rid),
    derived,
  );
}

/** Which of these ids of `type` the store holds (deleted ones included: their id is taken). */
export async function storedIds(sql: Queryable, type: string, ids: string[]): Promise<Set<string>> {
  const { rows } = await sql.query<{ id: string }>('SELECT id FROM fhir_resources WHERE resource_type = $1 AND id = ANY($2::text[])', [type, ids]);
  return new Set(rows.map((r) => r.id));
}

/**
 * Forgets up to `limit` earlier versions that were replaced before `before` (a later version of the resource was
 * made before it): retention of old versions. The current version is never touched. Returns how many it forgot.
 */
export async function forgetVersionsReplacedBefore(sql: Queryable, before: Date, limit: number): Promise<number> {
  const { rowCount } = await sql.query(`DELETE FROM fhir_resource_versions WHERE (rid, version_id) IN (SELECT v.rid, v.version_id ${REPLACED_BEFORE} LIMIT $2)`, [
    before.toISOString(),
    limit,
  ]);
  return rowCount;
}

/** How many versions forgetVersionsReplacedBefore would forget (a retention dry run). */
export async function countVersionsReplacedBefore(sql: Queryable, before: Date): Promise<number> {
  const { rows } = await sql.query<{ n: string }>(`SELECT count(*) AS n ${REPLACED_BEFORE}`, [before.toISOString()]);
  return Number(rows[0]!.n);
}

/** The versions replaced before $1 (by a later version itself older than $1). */
const REPLACED_BEFORE = `FROM fhir_resource_versions v
  WHERE v.last_updated < $1
    AND (EXISTS (SELECT 1 FROM fhir_resource_versions n WHERE n.rid = v.rid AND n.version_id > v.version_id AND n.last_updated < $1)
         OR EXISTS (SELECT 1 FROM fhir_resources r WHERE r.rid = v.rid AND r.version_id > v.version_id AND r.last_updated < $1))`;
