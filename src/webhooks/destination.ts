import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';
import { Agent } from 'undici';

/**
 * Where webhook deliveries may go (SSRF guard): never to private, link-local, unique-local, multicast or
 * unspecified addresses, nor to loopback except where plain-HTTP loopback callbacks are allowed (development).
 * Checked when a subscription is made and again at every delivery, on the addresses the name resolves to then;
 * the delivery connects to the address that was checked (no second lookup a rebinding DNS could answer).
 */
const internal = new BlockList();
for (const [net, bits] of [
  ['0.0.0.0', 8], ['10.0.0.0', 8], ['100.64.0.0', 10], ['169.254.0.0', 16], ['172.16.0.0', 12], ['192.0.0.0', 24], ['192.168.0.0', 16],
  ['198.18.0.0', 15], ['224.0.0.0', 4], ['240.0.0.0', 4],
] as const)
  internal.addSubnet(net, bits, 'ipv4');
for (const [net, bits] of [['::', 128], ['fc00::', 7], ['fe80::', 10], ['ff00::', 8], ['64:ff9b::', 96]] as const) internal.addSubnet(net, bits, 'ipv6');
const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

/** Why deliveries may not go to this address, or undefined. IPv4-mapped IPv6 addresses are judged as IPv4. */
export function addressProblem(address: string, allowLoopback: boolean): string | undefined {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  const ip = mapped ?? address;
  const family = isIP(ip) === 6 ? 'ipv6' : 'ipv4';
  if (loopback.check(ip, family)) return allowLoopback ? undefined : `resolves to a loopback address (${address})`;
  if (internal.check(ip, family)) return `resolves to a private, link-local or reserved address (${address})`;
  return undefined;
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

/** An HTTP agent whose connections go to `address` whatever the URL's name resolves to now (TLS still checks the name). */
export function pinnedAgent(address: string, family: 4 | 6): Agent {
  return new Agent({
    connect: {
      lookup: (_hostname, options, callback) =>
        (options as { all?: boolean }).all ? callback(null, [{ address, family }] as never, family) : callback(null, address, family),
    },
  });
}
