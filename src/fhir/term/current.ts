/**
 * Which version of a code system, value set or concept map answers when none is asked for: its current version (R4:
 * a server uses its current or latest version). The one rule, used by every statement that picks a version (the
 * operations, the expansions, `:below`/`:in` searches, the maps' displays and memberOf(), the TerminologyCapabilities):
 *
 * - versions that compare are ordered as versions: numbers separated by dots (`2.77`, `1.10` after `1.9`), SNOMED CT's
 *   edition URIs by their date (`…/version/20240301`), and ISO dates (`2024-03-01`); the highest is current;
 * - a version that does not compare (`draft`, `1.0.0-beta`, none) is current only when no active version of the url
 *   compares; among those, the most recently loaded is.
 *
 * A version asked for (`version`, `url|version`, `valueSetVersion`) answers whatever this rule says.
 */

/** The comparable key of a version (numeric[]), NULL when it does not compare: `version` an SQL expression. */
export const versionKey = (version: string) => `(CASE
    WHEN ${version} ~ '^[0-9]{1,15}(\\.[0-9]{1,15}){0,15}$' THEN string_to_array(${version}, '.')::numeric[]
    WHEN ${version} ~ '/version/[0-9]{8}$' THEN ARRAY[right(${version}, 8)::numeric]
    WHEN ${version} ~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}$' THEN ARRAY[replace(${version}, '-', '')::numeric] END)`;

/** ORDER BY text putting the current version of a url first: `t` the table or its alias (its `version` and `id`). */
export const currentFirst = (t: string) => `${versionKey(`${t}.version`)} DESC NULLS LAST, ${t}.id DESC`;
