/**
 * A name as compared (a patient's by the match rule, a country's by countryCodeOf): Unicode-decomposed with accents
 * dropped, lower case, and every run of anything that is not a letter or digit (spaces, hyphens, apostrophes, dots)
 * made one space.
 * "Jean-Pierre  N'Dongo", "jean pierre n dongo" and "JEAN PIERRE NDÓNGO" differ only as shown:
 * the first two compare equal, the third is "jean pierre ndongo".
 */
export function normaliseName(name: string): string {
  return name
    .normalize('NFKD')
    .replace(/\p{M}/gu, '')
    .toLowerCase()
    .replace(/[^\p{L}\p{N}]+/gu, ' ')
    .trim();
}
