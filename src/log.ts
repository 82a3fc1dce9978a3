/**
 * One JSON line per event (`error` and `warn` on stderr, the rest on stdout); never patient data, only identifiers
 * and timings. `error`: something broke; `warn`: something an operator should look at (alert on warn and above);
 * `info`: what happened; `debug`: details.
 */
export const LOG_LEVELS = ['silent', 'error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];
const rank: Record<LogLevel, number> = { silent: 0, error: 1, warn: 2, info: 3, debug: 4 };

export interface Logger {
  error(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  debug(msg: string, fields?: Record<string, unknown>): void;
}

export function createLogger(level: LogLevel): Logger {
  const write = (at: LogLevel, msg: string, fields?: Record<string, unknown>) => {
    if (rank[at] > rank[level]) return;
    const line = JSON.stringify({ time: new Date().toISOString(), level: at, msg, ...fields });
    (rank[at] <= rank.warn ? process.stderr : process.stdout).write(line + '\n');
  };
  return {
    error: (msg, fields) => write('error', msg, fields),
    warn: (msg, fields) => write('warn', msg, fields),
    info: (msg, fields) => write('info', msg, fields),
    debug: (msg, fields) => write('debug', msg, fields),
  };
}
