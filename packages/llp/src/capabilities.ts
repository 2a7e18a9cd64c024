/**
 * What an LLP promises. DDP reads these to refuse an LLP that breaks RFC 5041 §3, and to apply the
 * DDPP core draft's rules per class (reliable/unreliable × ordered/unordered, draft §3.1–3.4).
 */
export interface LlpCapabilities {
  /** Every ULPDU sent is delivered, or the connection fails (RFC 5041 §3: reliable delivery). */
  readonly reliable: boolean;
  /** ULPDUs of one stream are delivered in the order sent (RFC 5041 §3: in-order delivery per stream). */
  readonly ordered: boolean;
  /** Each ULPDU arrives whole with its exact length: no merging, no splitting (RFC 5041 §3, §5.2). */
  readonly preservesMessageBoundaries: boolean;
  /**
   * Received ULPDUs are checked by a digest at least as strong as CRC32c before delivery
   * (RFC 5041 §3; MPA with CRC and SCTP's CRC32c qualify; MPA without CRC, loopback and UDP do not).
   */
  readonly strongDigest: boolean;
  /** Most LLP streams one connection can carry (1 for MPA/TCP; the negotiated stream count for SCTP). */
  readonly maxStreams: number;
  /** Most octets of private data exchanged at connection setup (0: no private data). */
  readonly maxPrivateData: number;
}

/** The four classes of the DDPP core draft (§3.1–§3.4). */
export type LlpClass = 'reliable-ordered' | 'reliable-unordered' | 'unreliable-ordered' | 'unreliable-unordered';

/** The DDPP core draft's class of an LLP with these capabilities. */
export function llpClass(c: Pick<LlpCapabilities, 'reliable' | 'ordered'>): LlpClass {
  return `${c.reliable ? 'reliable' : 'unreliable'}-${c.ordered ? 'ordered' : 'unordered'}`;
}

/**
 * The ways an LLP falls short of RFC 5041 §3's requirements for a DDP LLP, in words.
 * Empty when it meets them all. `requireDigest: false` allows a digest-less LLP (a deliberate,
 * documented relaxation, e.g. for loopback or MPA with CRC disabled).
 */
export function rfc5041Shortfalls(c: LlpCapabilities, options: { requireDigest?: boolean } = {}): string[] {
  const out: string[] = [];
  if (!c.reliable) out.push('not reliable (RFC 5041 §3)');
  if (!c.ordered) out.push('not ordered within a stream (RFC 5041 §3)');
  if (!c.preservesMessageBoundaries) out.push('does not preserve ULPDU boundaries (RFC 5041 §3)');
  if ((options.requireDigest ?? true) && !c.strongDigest)
    out.push('no digest at least as strong as CRC32c (RFC 5041 §3)');
  return out;
}
