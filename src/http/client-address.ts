import ipaddr from 'ipaddr.js';
import type { Middleware } from 'koa';
import type { ProxyTrust } from '../core/settings';

export { parseTrustProxy, type ProxyTrust } from '../core/settings';

/** A valid address, with IPv4-mapped IPv6 (`::ffff:10.0.0.1`, how a dual-stack socket reports IPv4) as IPv4. */
function parsed(text: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  return ipaddr.isValid(text) ? ipaddr.process(text) : undefined;
}

function inRanges(address: string, ranges: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]>): boolean {
  const a = parsed(address);
  return !!a && ranges.some(([range, bits]) => range.kind() === a.kind() && a.match(range, bits));
}

/**
 * The caller's address: the socket's, or the first X-Forwarded-For entry, counted from the right, that was not
 * written by a trusted proxy. An entry that is not an IP address is not believed: the address of the trusted
 * hop that passed it on is used instead.
 */
export function clientAddress(socketAddress: string, forwardedFor: string | undefined, trust: ProxyTrust): string {
  if (trust.kind === 'none' || !forwardedFor) return socketAddress;
  // Nearest first: the socket's peer, then the header from its right-hand end.
  const chain = [socketAddress, ...forwardedFor.split(',').map((e) => e.trim()).reverse()];
  let i = 0;
  while (i < chain.length - 1 && (trust.kind === 'hops' ? i < trust.hops : inRanges(chain[i]!, trust.ranges))) i++;
  while (i > 0 && !parsed(chain[i]!)) i--;
  return chain[i]!;
}

/** Sets `ctx.ip` (audit trail, rate limits) by PONT_TRUST_PROXY; the one place that reads X-Forwarded-For. */
export function clientAddressMiddleware(trust: ProxyTrust): Middleware {
  return async (ctx, next) => {
    ctx.request.ip = clientAddress(ctx.req.socket.remoteAddress ?? '', ctx.get('x-forwarded-for') || undefined, trust);
    await next();
  };
}
