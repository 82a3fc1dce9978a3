import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { pontCommand } from './harness';

const repoRoot = fileURLToPath(new URL('..', import.meta.url));

/** `pont bridge-agent` as a child process: its output so far, its MLLP port, and a way to stop it. */
export interface AgentProcess {
  child: ChildProcess;
  port: number;
  output: () => string;
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** The agent of a config file (on the queue it keeps), once it listens; rejects with its output if it exits first. */
export async function spawnAgentProcess(configPath: string, port: number, env: Record<string, string> = {}): Promise<AgentProcess> {
  const child = spawn(process.execPath, pontCommand('bridge-agent', '--config', configPath), { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  await new Promise<void>((resolve, reject) => {
    const timer = setInterval(() => /bridge agent listening/.test(out) && (clearInterval(timer), resolve()), 20);
    child.once('exit', () => (clearInterval(timer), reject(new Error(`the agent exited: ${out}`))));
  });
  return {
    child,
    port,
    output: () => out,
    async kill(signal = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill(signal);
      await exited;
    },
  };
}
