import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// The access policy holds only if clinical and facility data are reached through the repository (which applies
// src/policy on every read and write). These rules make a new door that bypasses it fail the build.

const root = fileURLToPath(new URL('..', import.meta.url));
const files = (dir: string): string[] =>
  readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
const sources = files(join(root, 'src')).map((path) => ({ path: relative(root, path), text: readFileSync(path, 'utf8') }));

/** Tables of clinical and facility data (and the consent index the policy reads). */
const CLINICAL_TABLES = /\b(?:FROM|JOIN|INTO|UPDATE|DELETE FROM)\s+(fhir_resources|fhir_resource_versions|fhir_idx_\w+|fhir_links|consent_access|emergency_access|blood_units|blood_stock|pharmacy_stock|payments)\b/;

/**
 * Where SQL may name those tables: the store and repository (which apply the policy), the policy itself, and the
 * derived tables the repository keeps in step in each write's transaction. Each other entry says why.
 */
const ALLOWED = [
  /^src\/fhir\/store\//,
  /^src\/fhir\/search\//,
  /^src\/fhir\/repository\.ts$/,
  /^src\/policy\//,
  /^src\/inventory\/(blood|payments|pharmacy)\.ts$/, // derived tables and their aggregates (not patient data)
  /^src\/consents\/record\.ts$/, // the consent index, a derived table of Consent resources
  /^src\/consents\/service\.ts$/, // reads the consent index of the patient or organisation the route has already checked
  /^src\/fhir\/import\.ts$/, // `pont import`, an operator command: the dangling-reference report after an import
  /^src\/bridge\/sync\.ts$/, // compares a batch with what the agent's organisation owns (the policy's owner filter)
  /^src\/demo\/reset\.ts$/, // wipes the demo organisation's own rows (an operator action, serialised)
];

describe('the access policy cannot be bypassed', () => {
  it('SQL names clinical and facility tables only in the store, the repository, the policy and the derived tables', () => {
    const offenders = sources.filter((f) => CLINICAL_TABLES.test(f.text) && !ALLOWED.some((a) => a.test(f.path))).map((f) => f.path);
    expect(offenders).toEqual([]);
  });

  it('no route module queries the database for clinical data: routes reach it through the repository they are handed', () => {
    const routes = sources.filter((f) => /^src\/routes\//.test(f.path));
    expect(routes.length).toBeGreaterThan(5);
    const offenders = routes.filter((f) => CLINICAL_TABLES.test(f.text)).map((f) => f.path);
    expect(offenders).toEqual([]);
  });

  it('no other module carries a copy of the consent rule', () => {
    // The grant conditions (status, granted_at, expires_at of consent_access) are written once, in src/policy.
    const copies = sources.filter((f) => /consent_access[\s\S]{0,400}expires_at\s*>\s*now\(\)/.test(f.text) && !f.path.startsWith('src/policy/')).map((f) => f.path);
    expect(copies).toEqual([]);
  });
});
