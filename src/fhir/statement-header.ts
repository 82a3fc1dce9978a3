/**
 * How every statement Pont publishes about itself opens (the CapabilityStatement, the TerminologyCapabilities): one
 * publisher and one software version for both, dated at the request.
 */
export function statementHeader() {
  return { status: 'active' as const, date: new Date().toISOString(), publisher: 'Pont', kind: 'instance' as const, software: { name: 'Pont', version: '0.1.0' } };
}
