/**
 * The path MTU an association starts with (RFC 4960 §7.3; RFC 8899 §3: a PMTU from the local route is a
 * sound starting point): the MTU of the interface the route to the peer leaves by, read from Linux's
 * /sys/class/net/<interface>/mtu. Traffic to one of this host's own addresses leaves by loopback.
 */
import { readFileSync } from 'node:fs';
import { isIPv4, isIPv6 } from 'node:net';
import { networkInterfaces } from 'node:os';

/** What a path is assumed to carry when nothing better is known (Ethernet). */
export const DEFAULT_LINK_MTU = 1500;

function readMtu(name: string): number | undefined {
  try {
    const n = Number.parseInt(readFileSync(`/sys/class/net/${name}/mtu`, 'utf8'), 10);
    return Number.isInteger(n) && n >= 576 ? n : undefined;
  } catch {
    return undefined;
  }
}

function ipv4ToInt(a: string): number {
  return a.split('.').reduce((n, part) => ((n << 8) | Number(part)) >>> 0, 0);
}

function loopbackName(): string | undefined {
  for (const [name, list] of Object.entries(networkInterfaces())) {
    if (list?.some((i) => i.internal)) return name;
  }
  return undefined;
}

/** The interface the kernel's IPv4 default route leaves by (/proc/net/route), if any. */
function defaultRouteInterface(): string | undefined {
  try {
    for (const line of readFileSync('/proc/net/route', 'utf8').split('\n').slice(1)) {
      const [iface, destination, , , , , , mask] = line.trim().split(/\s+/);
      if (iface && destination === '00000000' && mask === '00000000') return iface;
    }
  } catch {
    // not Linux
  }
  return undefined;
}

/** The link MTU towards `peer` (an IP address), seen from `local` (the address we send from, if known). */
export function linkMtuTowards(peer: string, local?: string): number {
  const interfaces = networkInterfaces();
  const isLoopback = peer.startsWith('127.') || peer === '::1';
  const own = Object.values(interfaces).some((list) => list?.some((i) => i.address === peer));
  if (isLoopback || own) {
    const lo = loopbackName();
    return (lo ? readMtu(lo) : undefined) ?? 65_536;
  }
  for (const [name, list] of Object.entries(interfaces)) {
    for (const i of list ?? []) {
      if (i.internal) continue;
      if (local && i.address === local) return readMtu(name) ?? DEFAULT_LINK_MTU;
      if (isIPv4(peer) && i.family === 'IPv4') {
        const mask = ipv4ToInt(i.netmask);
        if ((ipv4ToInt(i.address) & mask) === (ipv4ToInt(peer) & mask)) return readMtu(name) ?? DEFAULT_LINK_MTU;
      }
    }
  }
  const viaDefault = isIPv6(peer) ? undefined : defaultRouteInterface();
  return (viaDefault ? readMtu(viaDefault) : undefined) ?? DEFAULT_LINK_MTU;
}

/**
 * The largest SCTP packet for a path with link MTU `mtu`: what an IP datagram carries after its header
 * (20 octets IPv4, 40 IPv6) and, encapsulated, the UDP header (8, RFC 6951); at most what one UDP
 * datagram or IP packet can hold.
 */
export function sctpPacketSize(mtu: number, peer: string, encapsulation: 'udp' | 'raw'): number {
  const ipHeader = isIPv6(peer) ? 40 : 20;
  const udpHeader = encapsulation === 'udp' ? 8 : 0;
  const max = 65_535 - (isIPv6(peer) ? 0 : ipHeader) - udpHeader;
  return Math.max(576 - ipHeader - udpHeader, Math.min(mtu - ipHeader - udpHeader, max));
}
