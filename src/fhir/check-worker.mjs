// A worker thread of src/fhir/check.ts: Pont runs its TypeScript through tsx, which each thread registers.
import { register } from 'tsx/esm/api';

register();
const { checkSlice } = await import('./check.ts');
export default checkSlice;
