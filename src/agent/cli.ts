/** `pont bridge-agent --config FILE`: runs the HL7 v2 Bridge agent until SIGINT/SIGTERM; SIGHUP reloads the maps. */
import { listenProblem } from '../core/listen';
import { startAgent } from './agent';
import { AgentConfigError, loadAgentConfig } from './config';

export async function bridgeAgentCommand(configFile: string): Promise<number> {
  let config;
  try {
    config = loadAgentConfig(configFile);
  } catch (err) {
    if (!(err instanceof AgentConfigError)) throw err;
    console.error(`pont bridge-agent: ${err.message}`);
    return 1;
  }
  let agent;
  try {
    agent = await startAgent(config);
  } catch (err) {
    // A map that does not compile, a port in use (named by its key), a queue directory it cannot write.
    const problem = listenProblem(err, { port: 'mllp_port', host: 'mllp_host' }, config.mllp_host, config.mllp_port);
    console.error(`pont bridge-agent: cannot start: ${problem ?? (err as Error).message}`);
    return 1;
  }
  const log = (msg: string, data: Record<string, unknown>) => process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), level: 'info', msg, ...data })}\n`);
  process.on('SIGHUP', () => {
    const outcome = agent.reloadMaps();
    if (outcome.ok) log('mappings reloaded', { version: outcome.version, previous: outcome.previous });
    else log('mappings reload refused; the running maps stay', { version: outcome.version, error: outcome.error.message });
  });
  return new Promise<number>((resolve) => {
    const stop = () => void agent.close().then(() => resolve(0));
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}
