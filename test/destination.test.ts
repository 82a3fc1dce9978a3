import { describe, expect, it } from 'vitest';
import { addressProblem, checkedAddress, DestinationRefused } from '../src/webhooks/destination';

/**
 * Where webhook deliveries may go (issue 21, item 7): public unicast addresses only, whatever form the address
 * takes; loopback only where plain-HTTP loopback callbacks are allowed (development).
 */
const allowed: string[] = [
  '8.8.8.8',
  '1.1.1.1',
  '93.184.216.34',
  '100.63.255.255', // just below carrier-grade NAT
  '100.128.0.0', // just above it
  '172.15.255.255', // just below 172.16/12
  '172.32.0.1', // just above it
  '192.169.0.1',
  '198.17.255.255', // just below the benchmarking 198.18/15
  '223.255.255.254',
  '::ffff:8.8.8.8', // IPv4-mapped, judged as IPv4
  '::ffff:808:808', // the same, in hex
  '2606:4700:4700::1111',
  '2001:4860:4860::8888',
  '2a00:1450:4001:80b::200e',
  '2001:1900::1', // outside Teredo 2001::/32 and the reserved 2001::/23
  '2003::1', // just above 6to4 2002::/16
  '3ffe:ffff::1', // below the documentation 3fff::/20
];

const refused: Array<[string, string]> = [
  // IPv4
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', 'this network'],
  ['10.0.0.1', 'private'],
  ['10.255.255.255', 'private'],
  ['100.64.0.1', 'carrier-grade NAT'],
  ['100.127.255.254', 'carrier-grade NAT'],
  ['169.254.169.254', 'link-local (cloud metadata)'],
  ['172.16.0.1', 'private'],
  ['172.31.255.254', 'private'],
  ['192.0.0.8', 'IETF protocol assignments'],
  ['192.0.2.1', 'documentation'],
  ['192.88.99.1', '6to4 relay anycast'],
  ['192.168.1.1', 'private'],
  ['198.18.0.1', 'benchmarking'],
  ['198.51.100.7', 'documentation'],
  ['203.0.113.9', 'documentation'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.250', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.255', 'broadcast'],
  // IPv6
  ['::', 'unspecified'],
  ['::ffff:10.0.0.1', 'IPv4-mapped private'],
  ['::ffff:169.254.169.254', 'IPv4-mapped link-local'],
  ['::ffff:a9fe:a9fe', 'IPv4-mapped link-local, in hex'],
  ['::ffff:0.0.0.0', 'IPv4-mapped unspecified'],
  ['::a00:1', 'IPv4-compatible 10.0.0.1'],
  ['::10.0.0.1', 'IPv4-compatible, dotted'],
  ['::8.8.8.8', 'IPv4-compatible (deprecated: never a destination)'],
  ['::ffff:0:a00:1', 'IPv4-translated (RFC 6145)'],
  ['64:ff9b::a00:1', 'NAT64 (RFC 6052)'],
  ['64:ff9b:1::1', 'local-use NAT64 (RFC 8215)'],
  ['100::1', 'discard'],
  ['2001::1', 'Teredo'],
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'Teredo'],
  ['2001:2::1', 'benchmarking'],
  ['2001:db8::1', 'documentation'],
  ['2001:10::1', 'ORCHID'],
  ['2002::1', '6to4'],
  ['2002:a00:1::1', '6to4 of 10.0.0.1'],
  ['2002:7f00:1::1', '6to4 of 127.0.0.1'],
  ['3fff::1', 'documentation (RFC 9637)'],
  ['5f00::1', 'segment routing'],
  ['fc00::1', 'unique local'],
  ['fd12:3456:789a::1', 'unique local'],
  ['fe80::1', 'link-local'],
  ['fe80::1%eth0', 'link-local with a zone'],
  ['febf::1', 'link-local'],
  ['fec0::1', 'site-local (deprecated)'],
  ['feff::1', 'site-local (deprecated)'],
  ['ff02::1', 'multicast'],
  ['4000::1', 'outside global unicast 2000::/3'],
  ['not an address', 'unparseable'],
];

const loopback = ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1', '::ffff:7f00:1'];

describe('addressProblem', () => {
  it('has a table of at least 40 addresses', () => {
    expect(allowed.length + refused.length + loopback.length).toBeGreaterThanOrEqual(40);
  });

  it.each(allowed)('allows the public unicast address %s', (address) => {
    expect(addressProblem(address, false)).toBeUndefined();
  });

  it.each(refused)('refuses %s (%s), even where loopback is allowed', (address) => {
    expect(addressProblem(address, false)).toMatch(/^resolves to a private, link-local or reserved address/);
    expect(addressProblem(address, true)).toMatch(/^resolves to a private, link-local or reserved address/);
  });

  it.each(loopback)('refuses the loopback address %s unless loopback callbacks are allowed', (address) => {
    expect(addressProblem(address, false)).toMatch(/^resolves to a loopback address/);
    expect(addressProblem(address, true)).toBeUndefined();
  });
});

describe('checkedAddress', () => {
  it('judges literal hosts of a URL, bracketed IPv6 included', async () => {
    await expect(checkedAddress('https://[2002:a00:1::1]/hooks', false)).rejects.toBeInstanceOf(DestinationRefused);
    await expect(checkedAddress('https://[::a00:1]/hooks', false)).rejects.toBeInstanceOf(DestinationRefused);
    await expect(checkedAddress('https://[fec0::1]/hooks', false)).rejects.toBeInstanceOf(DestinationRefused);
    await expect(checkedAddress('https://[2001::1]/hooks', false)).rejects.toBeInstanceOf(DestinationRefused);
    await expect(checkedAddress('https://0x7f000001/hooks', false)).rejects.toBeInstanceOf(DestinationRefused); // 127.0.0.1
    await expect(checkedAddress('https://[2606:4700:4700::1111]/hooks', false)).resolves.toEqual({ address: '2606:4700:4700::1111', family: 6 });
    await expect(checkedAddress('https://8.8.8.8/hooks', false)).resolves.toEqual({ address: '8.8.8.8', family: 4 });
    await expect(checkedAddress('http://127.0.0.1:8080/hooks', true)).resolves.toEqual({ address: '127.0.0.1', family: 4 });
  });
});
