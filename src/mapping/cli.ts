import { loadConfig } from '../config';
import { checkMappings, defaultMappingsDir, type ServiceChecks } from './index';

/** `pont mappings check [DIR]`: for people editing maps. Exit code 0 when every map compiles and every example holds. */
export async function mappingsCommand(args: string[], checks: ServiceChecks = {}): Promise<number> {
  const [action, dirArg, ...rest] = args;
  if (action !== 'check' || rest.length) {
    console.error('Usage: pont mappings check [DIR]');
    return 2;
  }
  const dir = dirArg ?? loadConfig().mappingsDir ?? defaultMappingsDir;
  const { problems, examplesRun, maps } = checkMappings(dir, checks);
  for (const problem of problems) console.error(problem.message);
  const summary = `${maps.length} map${maps.length === 1 ? '' : 's'}, ${examplesRun} example${examplesRun === 1 ? '' : 's'} run both ways`;
  if (problems.length) {
    console.error(`${problems.length} problem${problems.length === 1 ? '' : 's'} (${summary})`);
    return 1;
  }
  console.log(`${dir}: ${summary}; all good`);
  return 0;
}
