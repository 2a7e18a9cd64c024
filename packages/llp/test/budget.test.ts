import { describe, expect, it } from 'vitest';
import { MemoryBudget, parseOctets, processMemoryBudget, SourceShares, sourceKey } from '../src/index.js';

describe('sourceKey: who a place counts against', () => {
  it('IPv4 as it is; IPv4-mapped IPv6 as its IPv4 address', () => {
    expect(sourceKey('127.0.0.5')).toBe('127.0.0.5');
    expect(sourceKey('::ffff:127.0.0.5')).toBe('127.0.0.5');
    expect(sourceKey('::FFFF:10.1.2.3')).toBe('10.1.2.3');
  });
  it('IPv6 grouped by /64 by default, whatever the interface identifier', () => {
    const a = sourceKey('2001:db8:1:2:aaaa:bbbb:cccc:dddd');
    expect(a).toBe('2001:db8:1:2:0:0:0:0/64');
    expect(sourceKey('2001:db8:1:2::1')).toBe(a);
    expect(sourceKey('2001:0DB8:0001:0002:ffff::9')).toBe(a);
    expect(sourceKey('2001:db8:1:3::1')).not.toBe(a);
    expect(sourceKey('fe80::1%eth0')).toBe('fe80:0:0:0:0:0:0:0/64');
  });
  it('the prefix is configurable (128: each address apart; 48: a site)', () => {
    expect(sourceKey('2001:db8::1', 128)).not.toBe(sourceKey('2001:db8::2', 128));
    expect(sourceKey('2001:db8:0:1::1', 48)).toBe(sourceKey('2001:db8:0:2::1', 48));
    expect(sourceKey('::1')).toBe('0:0:0:0:0:0:0:0/64');
    expect(sourceKey('64:ff9b::192.0.2.33', 128)).toBe('64:ff9b:0:0:0:0:c000:221/128');
  });
});

describe('SourceShares', () => {
  it('gives one source at most its share, others theirs', () => {
    const s = new SourceShares(2);
    expect(s.take('a')).toBe(true);
    expect(s.take('a')).toBe(true);
    expect(s.take('a')).toBe(false);
    expect(s.take('b')).toBe(true);
    expect(s.size).toBe(3);
    s.give('a');
    expect(s.take('a')).toBe(true);
    s.give('zzz');
    expect(s.size).toBe(3);
  });
});

describe('MemoryBudget', () => {
  it('refuses past the process limit and past one source share; release gives back', () => {
    const b = new MemoryBudget({ limit: 1000, sourceShare: 0.5 });
    const r1 = b.reserve(400, 'a');
    expect(r1).toBeDefined();
    expect(b.reserve(200, 'a')).toBeUndefined(); // a's share is 500
    const r2 = b.reserve(500, 'b');
    expect(r2).toBeDefined();
    expect(b.reserve(200, 'c')).toBeUndefined(); // process: 900 + 200 > 1000
    expect(b.refused).toBe(2);
    r1?.release();
    r1?.release();
    expect(b.used).toBe(500);
    expect(b.usedBy('a')).toBe(0);
    expect(b.reserve(200, 'c')).toBeDefined();
  });
  it('resize grows within the limits and shrinks always', () => {
    const b = new MemoryBudget({ limit: 100, sourceShare: 1 });
    const r = b.reserve(10, 'a');
    expect(r?.resize(100)).toBe(true);
    expect(r?.resize(101)).toBe(false);
    expect(r?.octets).toBe(100);
    expect(r?.resize(5)).toBe(true);
    expect(b.used).toBe(5);
    expect(b.peak).toBe(100);
  });
  it('{ share: false }: the process limit only, still counted under the source', () => {
    const b = new MemoryBudget({ limit: 100, sourceShare: 0.25 });
    expect(b.reserve(30, 'a')).toBeUndefined();
    const r = b.reserve(90, 'a', { share: false });
    expect(r).toBeDefined();
    expect(b.usedBy('a')).toBe(90);
    expect(r?.resize(101)).toBe(false);
    expect(b.reserve(20, 'b', { share: false })).toBeUndefined();
  });
  it('one budget per process, whichever copy asks', () => {
    expect(processMemoryBudget()).toBe(processMemoryBudget());
    expect(processMemoryBudget().limit).toBeGreaterThan(0);
  });
  it('parses sizes as the flags take them', () => {
    expect(parseOctets('512m')).toBe(512 * 1024 * 1024);
    expect(parseOctets('1G')).toBe(1024 ** 3);
    expect(parseOctets('65536')).toBe(65536);
    expect(parseOctets('64KiB')).toBe(65536);
    expect(parseOctets('-1')).toBeUndefined();
    expect(parseOctets('lots')).toBeUndefined();
  });
});
