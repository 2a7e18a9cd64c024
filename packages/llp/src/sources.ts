/**
 * Sources: who a listener's places and octets are counted against (docs/SECURITY.md "a share per source").
 *
 * A source is an IPv4 address, or an IPv6 prefix (a /64 by default: one host commonly owns a whole /64,
 * so counting its addresses apart would let it take 2^64 shares). IPv4-mapped IPv6 addresses count as
 * their IPv4 address. Ports never matter: one host opening many sockets is one source.
 */
import { isIP } from 'node:net';

/** IPv6 prefix length sources are grouped by, unless configured: 64. */
export const DEFAULT_IPV6_SOURCE_PREFIX = 64;

/** The source an address counts under; `ipv6Prefix` (0–128) groups IPv6 addresses. */
export function sourceKey(host: string, ipv6Prefix: number = DEFAULT_IPV6_SOURCE_PREFIX): string {
  let h = host;
  const zone = h.indexOf('%');
  if (zone >= 0) h = h.slice(0, zone);
  const lower = h.toLowerCase();
  if (lower.startsWith('::ffff:') && lower.includes('.')) return lower.slice(7);
  if (isIP(h) !== 6) return h;
  const groups = expandIpv6(lower);
  if (groups === undefined) return h;
  const bits = Math.max(0, Math.min(128, Math.floor(ipv6Prefix)));
  const out: string[] = [];
  for (let i = 0; i < 8; i++) {
    const keep = Math.max(0, Math.min(16, bits - i * 16));
    const mask = keep === 0 ? 0 : (0xffff << (16 - keep)) & 0xffff;
    out.push(((groups[i] as number) & mask).toString(16));
  }
  return `${out.join(':')}/${bits}`;
}

/** The eight 16-bit groups of an IPv6 address (an embedded IPv4 tail as two groups), or undefined. */
function expandIpv6(a: string): number[] | undefined {
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(a);
  const text = v4
    ? `${a.slice(0, v4.index)}${((Number(v4[1]) << 8) | Number(v4[2])).toString(16)}:${((Number(v4[3]) << 8) | Number(v4[4])).toString(16)}`
    : a;
  const parse = (s: string): number[] => (s === '' ? [] : s.split(':').map((x) => Number.parseInt(x, 16)));
  const cut = text.indexOf('::');
  if (cut < 0) {
    const all = parse(text);
    return all.length === 8 ? all : undefined;
  }
  const left = parse(text.slice(0, cut));
  const right = parse(text.slice(cut + 2));
  const fill = 8 - left.length - right.length;
  if (fill < 1) return undefined;
  return [...left, ...new Array<number>(fill).fill(0), ...right];
}

/** Places (connections, startups, handshakes) a listener hands out, at most `perSource` to one source. */
export class SourceShares {
  private readonly held = new Map<string, number>();
  private total = 0;

  constructor(public perSource: number) {}

  /** Places `source` holds now. */
  count(source: string): number {
    return this.held.get(source) ?? 0;
  }
  /** Places held by all sources. */
  get size(): number {
    return this.total;
  }
  /** Sources holding places. */
  get sources(): number {
    return this.held.size;
  }
  /** Whether `source` may take one more place. */
  allows(source: string): boolean {
    return this.count(source) < this.perSource;
  }
  /** Takes a place for `source`; false when it already holds `perSource`. */
  take(source: string): boolean {
    const n = this.count(source);
    if (n >= this.perSource) return false;
    this.held.set(source, n + 1);
    this.total++;
    return true;
  }
  /** Gives one of `source`'s places back. */
  give(source: string): void {
    const n = this.count(source);
    if (n <= 0) return;
    this.total--;
    if (n === 1) this.held.delete(source);
    else this.held.set(source, n - 1);
  }
}
