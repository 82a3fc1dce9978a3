/**
 * The FHIR store: SQL only, split by concern. Writes (versions, index rows, links) in store/writes.ts,
 * search and includes in store/search.ts, reads, history and $everything in store/history.ts. Nothing
 * calls it but the repository (src/fhir/repository.ts), which decides access, audit and events, and the
 * audit trail itself.
 */
export { checkType, ID_PATTERN, versionTag, type RowFilter } from './store/types';
export { writeMany, insertIndexRows, type WriteItem, type WriteMethod, type WriteResult, type WriteHooks } from './store/writes';
export { searchResources, MAX_INCLUDED, type SearchAccess, type SearchOptions } from './store/search';
export { everythingBundle, historyBundle, readOneVersion, readVersion, type EverythingParams, type StoredVersion } from './store/history';
