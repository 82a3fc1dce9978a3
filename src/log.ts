/** One JSON line per event on stdout/stderr; never patient data, only identifiers and timings. */
export type LogLevel = 'silent' | 'error' | 'info' | 'debug';
const rank: Record<LogLevel, number> = { silent: 0, error: 1, info: 2, debug: 3 };

export interface Logger {
  error(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
}

export function createLogger(level: LogLevel): Logger {
  const write = (at: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (rank[at] > rank[level]) return;
    const line = JSON.stringify({ time: new Date().toISOString(), level: at, msg, ...fields });
    (at === 'error' ? process.stderr : process.stdout).write(line + '\n');
  };
  return {
    error: (msg, fields) => write('error', msg, fields),
    info: (msg, fields) => write('info', msg, fields),
    debug: (msg, fields) => write('debug', msg, fields),
  };
}
