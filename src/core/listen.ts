/**
 * Why a server could not listen on `host`:`port`, as the line `NAME: problem; fix: how` naming the setting at fault
 * (PORT or HOST, METRICS_PORT or METRICS_HOST, an agent's mllp_port or mllp_host); undefined for another error.
 */
export function listenProblem(err: unknown, names: { port: string; host: string }, host: string, port: number): string | undefined {
  const code = (err as NodeJS.ErrnoException)?.code;
  const address = `${host.includes(':') ? `[${host}]` : host}:${port}`;
  switch (code) {
    case 'EADDRINUSE':
      return `${names.port}: ${address} is in use by another process (EADDRINUSE); fix: set another ${names.port}, or stop what listens there`;
    case 'EACCES':
      return `${names.port}: this user may not listen on ${address} (EACCES: ports below 1024 need privileges); fix: set a ${names.port} of 1024 or more`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `${names.host}: "${host}" does not resolve to an address (${code}); fix: set an address of this machine, e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)`;
    case 'EADDRNOTAVAIL':
      return `${names.host}: ${host} is not an address of this machine (EADDRNOTAVAIL); fix: set an address of this machine, e.g. 127.0.0.1 (this machine only) or 0.0.0.0 (every interface)`;
    default:
      return undefined;
  }
}
