// The child process of pglite-first-start.ts run from the sources: registers tsx first.
import { register } from 'tsx/esm/api';

register();
await import('./pglite-first-start-process.ts');
