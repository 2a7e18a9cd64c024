/**
 * State cookies (RFC 4960 §5.1.3, as SCTP's INIT ACK / COOKIE ECHO): the listener answers a REQUEST with a
 * cookie and keeps nothing; only a COOKIE_ECHO carrying an authentic, unexpired cookie makes a connection.
 *
 * Cookie (16 octets): Timestamp (32 bits: the listener's monotonic clock in ms, modulo 2^32), then
 * HMAC-SHA-256 truncated to 96 bits over: the full 64-bit timestamp, the initiator's connection id, its
 * UDP port and address, and the REQUEST's setup body — keyed by a per-listener secret of 32 random octets.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { Peer } from './endpoint.js';
import { COOKIE_LENGTH, COOKIE_MAC_LENGTH, COOKIE_TIMESTAMP_LENGTH } from './wire.js';

const TWO_32 = 0x1_0000_0000;
const FORGED: CookieVerdict = { check: 'forged', issued: -1 };

/** What a COOKIE_ECHO's cookie turned out to be. */
export type CookieCheck = 'valid' | 'stale' | 'forged';

/** A checked cookie: what it is and, when authentic, when it was issued (on `CookieJar.now()`'s clock). */
export interface CookieVerdict {
  readonly check: CookieCheck;
  readonly issued: number;
}

export class CookieJar {
  private readonly secret = randomBytes(32);
  private readonly t0 = performance.now();

  constructor(private readonly lifetimeMs: number) {}

  /** The cookie for a REQUEST from `from` with connection id `initiatorId` and setup body `setup`. */
  issue(from: Peer, initiatorId: number, setup: Uint8Array): Buffer {
    const now = this.now();
    const cookie = Buffer.allocUnsafe(COOKIE_LENGTH);
    cookie.writeUInt32BE(now % TWO_32, 0);
    this.mac(now, from, initiatorId, setup).copy(cookie, COOKIE_TIMESTAMP_LENGTH, 0, COOKIE_MAC_LENGTH);
    return cookie;
  }

  /**
   * Checks an echoed cookie against the echo's sender, connection id and setup body. The issue time is the
   * latest one with the cookie's 32 timestamp bits, so a cookie older than 2^32 ms does not authenticate.
   */
  check(cookie: Uint8Array, from: Peer, initiatorId: number, setup: Uint8Array): CookieVerdict {
    if (cookie.byteLength !== COOKIE_LENGTH) return FORGED;
    const now = this.now();
    const stamp = Buffer.from(cookie.buffer, cookie.byteOffset, COOKIE_LENGTH).readUInt32BE(0);
    const age = ((now % TWO_32) - stamp + TWO_32) % TWO_32;
    const issued = now - age;
    if (issued < 0) return FORGED;
    const expected = this.mac(issued, from, initiatorId, setup).subarray(0, COOKIE_MAC_LENGTH);
    if (!timingSafeEqual(expected, cookie.subarray(COOKIE_TIMESTAMP_LENGTH))) return FORGED;
    return { check: age > this.lifetimeMs ? 'stale' : 'valid', issued };
  }

  /** The jar's clock: ms since it was made (monotonic); cookies carry its low 32 bits. */
  now(): number {
    return Math.floor(performance.now() - this.t0);
  }

  private mac(issued: number, from: Peer, initiatorId: number, setup: Uint8Array): Buffer {
    const fixed = Buffer.allocUnsafe(14);
    fixed.writeUInt32BE(Math.floor(issued / TWO_32), 0);
    fixed.writeUInt32BE(issued % TWO_32, 4);
    fixed.writeUInt32BE(initiatorId >>> 0, 8);
    fixed.writeUInt16BE(from.port, 12);
    return createHmac('sha256', this.secret)
      .update(fixed)
      .update(from.address, 'utf8')
      .update(Buffer.of(0))
      .update(setup)
      .digest();
  }
}
