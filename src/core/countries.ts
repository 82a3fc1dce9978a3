import { normaliseName } from './normalise';

/** ISO 3166-1 alpha-2 officially assigned codes: the possible Health ID prefixes and resolve `country_code`s. */
const ISO_3166_ALPHA2 = new Set(
  (
    'AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV BW BY BZ ' +
    'CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR ' +
    'GA GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP ' +
    'KE KG KH KI KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT ' +
    'MU MV MW MX MY MZ NA NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW ' +
    'SA SB SC SD SE SG SH SI SJ SK SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG ' +
    'UM US UY UZ VA VC VE VG VI VN VU WF WS YE YT ZA ZM ZW'
  ).split(' '),
);

export function isCountryCode(value: string): boolean {
  return ISO_3166_ALPHA2.has(value);
}

/** Names of the countries in the languages their records are written in around Pont's users, and in English. */
const NAME_LANGUAGES = ['en', 'fr', 'es', 'pt', 'de', 'it', 'nl', 'sv', 'ar', 'sw'];
let byName: Map<string, string> | undefined;

/**
 * The ISO 3166-1 alpha-2 code of a country as a record writes it (FHIR recommends the code in Address.country, but
 * systems write "Kenya", "Cameroun", "Sénégal", "ke"): the code itself in any case, else the country's name in one of
 * NAME_LANGUAGES (accents, case and punctuation aside, as Node's ICU names it); undefined for anything else.
 */
export function countryCodeOf(text: string): string | undefined {
  const code = text.trim().toUpperCase();
  if (code.length === 2) return ISO_3166_ALPHA2.has(code) ? code : undefined;
  if (!byName) {
    byName = new Map();
    for (const language of NAME_LANGUAGES) {
      const names = new Intl.DisplayNames([language], { type: 'region', fallback: 'none' });
      for (const iso of ISO_3166_ALPHA2) {
        const name = names.of(iso);
        const key = name && normaliseName(name);
        if (key && !byName.has(key)) byName.set(key, iso);
      }
    }
  }
  return byName.get(normaliseName(text));
}
