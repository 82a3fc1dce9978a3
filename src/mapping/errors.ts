/** A problem in a mapping file, located for the person editing it: message "file:line:column: what is wrong". */
export class MappingError extends Error {
  constructor(
    readonly file: string,
    readonly line: number,
    readonly column: number,
    /** What is wrong, without the location. */
    readonly problem: string,
  ) {
    super(`${file}:${line}:${column}: ${problem}`);
    this.name = 'MappingError';
  }
}

/**
 * A value that a compiled map cannot translate at run time: a Connect field of the wrong type or outside its
 * declared values, a required field missing, or a FHIR code the map has no row for. Routes answer it with 422.
 */
export class MappingValueError extends Error {
  constructor(
    readonly map: string,
    /** The Connect field concerned. */
    readonly field: string,
    problem: string,
  ) {
    super(`${map}: ${field}: ${problem}`);
    this.name = 'MappingValueError';
  }
}
