import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent } from 'undici';

/**
 * Where webhook deliveries may go (SSRF guard): only to public unicast addresses, never to private, link-local,
 * unique-local, site-local, multicast, reserved, documentation, NAT64 or tunnelling (6to4, Teredo) ones, nor to
 * loopback except where plain-HTTP loopback callbacks are allowed (development). Ranges are ipaddr.js's.
 * Checked when a subscription is made and again at every delivery, on the addresses the name resolves to then;
 * the delivery connects to the address that was checked (no second lookup a rebinding DNS could answer).
 */
/** IPv6 global unicast: anything outside it is unallocated today. */
const GLOBAL_UNICAST = ipaddr.parseCIDR('2000::/3');
/** IPv4-compatible addresses (RFC 4291 §2.5.5.1, deprecated): no destination is reached that way. */
const IPV4_COMPATIBLE = ipaddr.parseCIDR('::/96');

/**
 * The address as ipaddr.js should read it, or undefined when Node does not take it for one. An IPv6 address is
 * first written canonically (WHATWG URL): ipaddr.js reads `::a.b.c.d` as IPv4-mapped, the network stack as
 * IPv4-compatible. A zone (`fe80::1%eth0`) does not change the range and is dropped.
 */
function parsed(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  const bare = address.replace(/%.*$/, '');
  const family = isIP(bare);
  if (family === 4) return ipaddr.IPv4.parse(bare);
  if (family === 6) return ipaddr.IPv6.parse(new URL(`http://[${bare}]/`).hostname.slice(1, -1));
  return undefined;
}

/**
 * The ipaddr.js range of an address ('unicast': public), IPv4-mapped addresses judged as IPv4; also 'invalid',
 * 'ipv4Compatible' and 'unallocated' (IPv6 outside 2000::/3), which ipaddr.js does not name.
 */
export function addressRange(address: string): string {
  const ip = parsed(address);
  if (!ip) return 'invalid';
  if (ip.kind() === 'ipv4') return ip.range();
  const v6 = ip as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address().range();
  const range = v6.range(); // names ::, ::1, fe80::/10, fec0::/10, 2002::/16, 2001::/32, 64:ff9b::/96...
  if (range !== 'unicast') return range;
  if (v6.match(IPV4_COMPATIBLE)) return 'ipv4Compatible';
  return v6.match(GLOBAL_UNICAST) ? 'unicast' : 'unallocated';
}

/** Why deliveries may not go to this address, or undefined. */
export function addressProblem(address: string, allowLoopback: boolean): string | undefined {
  const range = addressRange(address);
  if (range === 'unicast') return undefined;
  if (range === 'loopback') return allowLoopback ? undefined : `resolves to a loopback address (${address})`;
  return `resolves to a private, link-local or reserved address (${address}: ${range})`;
}

/**
 * The address a delivery to `url` connects to, checked; throws DestinationRefused when it may not. A name that
 * does not resolve is refused for a delivery (there is nowhere to connect), but not at subscription
 * (`unresolvedOk`): it may resolve by the time events come, and is checked then.
 */
export async function checkedAddress(url: string, allowLoopback: boolean, unresolvedOk = false): Promise<{ address: string; family: 4 | 6 } | undefined> {
  const host = new URL(url).hostname.replace(/^\[|\]$/g, '');
  const addresses = isIP(host) ? [{ address: host, family: isIP(host) as 4 | 6 }] : await lookup(host, { all: true, verbatim: true }).catch(() => []);
  if (!addresses.length) {
    if (unresolvedOk) return undefined;
    throw new DestinationRefused(`${host} does not resolve`);
  }
  for (const a of addresses) {
    const problem = addressProblem(a.address, allowLoopback);
    if (problem) throw new DestinationRefused(`${host} ${problem}`);
  }
  return { address: addresses[0]!.address, family: addresses[0]!.family as 4 | 6 };
}

export class DestinationRefused extends Error {}

/** Agents kept per checked address: at most this many (the least recently used is closed). */
const MAX_PINNED_AGENTS = 256;

/**
 * The pinned agents of a delivery worker, one per checked address, kept for the next deliveries there so that their
 * connections (and TLS sessions) are used again: a new connection per attempt cost each notification a handshake.
 * The address is still checked before each attempt (checkedAddress); an agent only ever connects to the address it
 * was made for.
 */
export class PinnedAgents {
  private readonly agents = new Map<string, Agent>();

  for(address: string, family: 4 | 6): Agent {
    const key = `${family} ${address}`;
    let agent = this.agents.get(key);
    if (agent) this.agents.delete(key); // re-inserted last: the map runs from least to most recently used
    else agent = pinnedAgent(address, family);
    this.agents.set(key, agent);
    if (this.agents.size > MAX_PINNED_AGENTS) {
      const [oldest, old] = this.agents.entries().next().value!;
      this.agents.delete(oldest);
      void old.close().catch(() => undefined); // after its requests in flight
    }
    return agent;
  }

  async close(): Promise<void> {
    const all = [...this.agents.values()];
    this.agents.clear();
    await Promise.allSettled(all.map((a) => a.close()));
  }
}

/** An HTTP agent whose connections go to `address` whatever the URL's name resolves to now (TLS still checks the name). */
export function pinnedAgent(address: string, family: 4 | 6): Agent {
  return new Agent({
    connect: {
      lookup: (_hostname, options, callback) =>
        (options as { all?: boolean }).all ? callback(null, [{ address, family }] as never, family) : callback(null, address, family),
    },
  });
}
