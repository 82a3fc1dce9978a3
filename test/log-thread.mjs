// A worker thread of test/logs.test.ts: loads the logger from the TypeScript sources (tsx registered in the thread)
// and writes one line.
import { register } from 'tsx/esm/api';

register();
const { createLogger } = await import('../src/log.ts');
createLogger('info').info('from a thread', { n: 1 });
