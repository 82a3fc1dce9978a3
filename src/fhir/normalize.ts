/** String search normalisation: case- and accent-insensitive, as FHIR string search requires. */
export function normalizeString(value: string): string {
  return value.normalize('NFD').replace(/\p{M}/gu, '').toLowerCase().trim();
}

/** Escapes LIKE wildcards so a searched value matches literally. */
export function escapeLike(value: string): string {
  return value.replace(/[\\%_]/g, (c) => `\\${c}`);
}
