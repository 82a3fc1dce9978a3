import ipaddr from 'ipaddr.js';
import type { Middleware } from 'koa';

/**
 * Which X-Forwarded-For entries to believe (PONT_TRUST_PROXY). Each proxy appends the address it received the
 * request from, so only the right-hand end of the header is written by proxies we run; everything to the left
 * of it is whatever the caller sent. The caller's address is found as Express's `trust proxy` and nginx's
 * `real_ip_recursive` find it: start at the socket, walk the header from the right, and stop at the first
 * address that is not a trusted proxy.
 * - `none`: the socket's address; the header is ignored.
 * - `hops`: that many proxies in front of Pont (the socket's peer is the first).
 * - `ranges`: the proxies are the addresses in these ranges, however many there are.
 */
export type ProxyTrust = { kind: 'none' } | { kind: 'hops'; hops: number } | { kind: 'ranges'; ranges: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> };

/** Names accepted in a list, as in Express's `trust proxy`. */
const NAMED_RANGES: Record<string, string[]> = {
  loopback: ['127.0.0.0/8', '::1/128'],
  linklocal: ['169.254.0.0/16', 'fe80::/10'],
  uniquelocal: ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16', 'fc00::/7'],
};

/**
 * Parses PONT_TRUST_PROXY: `false` (or 0), a number of hops (`1`: one proxy in front), or a comma-separated list
 * of proxy addresses and CIDR ranges (`10.0.0.0/8,127.0.0.1`; also `loopback`, `linklocal`, `uniquelocal`).
 * `true`, the older form, means one hop: never the caller-controlled leftmost entry. Returns an error message.
 */
export function parseTrustProxy(text: string): ProxyTrust | string {
  const value = text.trim().toLowerCase();
  if (value === 'false' || value === '0') return { kind: 'none' };
  if (value === 'true') return { kind: 'hops', hops: 1 };
  if (/^\d+$/.test(value)) {
    const hops = Number(value);
    return hops <= 32 ? { kind: 'hops', hops } : 'must be false, a number of proxy hops (at most 32) or a list of proxy addresses/CIDR ranges';
  }
  const ranges: Array<[ipaddr.IPv4 | ipaddr.IPv6, number]> = [];
  for (const entry of value.split(',').map((p) => p.trim()).filter(Boolean)) {
    for (const cidr of NAMED_RANGES[entry] ?? [entry]) {
      try {
        ranges.push(cidr.includes('/') ? ipaddr.parseCIDR(cidr) : wholeAddress(cidr));
      } catch {
        return `"${entry}" is not an IP address or CIDR range (PONT_TRUST_PROXY: false, a number of hops, or a list such as 10.0.0.0/8,127.0.0.1)`;
      }
    }
  }
  return ranges.length ? { kind: 'ranges', ranges } : { kind: 'none' };
}

function wholeAddress(text: string): [ipaddr.IPv4 | ipaddr.IPv6, number] {
  const address = ipaddr.process(text);
  return [address, address.kind() === 'ipv4' ? 32 : 128];
}

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
