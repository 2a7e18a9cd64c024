/**
 * The public shape of @rddp/ddp: what RDMAP (and users) program against.
 * Section numbers are RFC 5041's unless said otherwise.
 */
import { codesByKey, type LlpStream, type Ulpdu } from '@rddp/llp';
import type { Observable } from 'rxjs';

/** DDP Version: 1 = IETF (RFC 5041), 0 = RDMA Consortium DDP 1.0. Chosen per stream (§4.1). */
export type DdpVersion = 0 | 1;
/** The two profiles: `ietf` (DV=1, RDMAP RV=1) and `rdmac` (DV=0, RV=0). */
export type DdpProfile = 'ietf' | 'rdmac';
export const DDP_VERSION: Readonly<Record<DdpProfile, DdpVersion>> = { ietf: 1, rdmac: 0 };

/** Tagged Buffer Model header (§4.2, Figure 4): 14 octets. */
export interface DdpTaggedHeader {
  readonly tagged: true;
  /** L: last segment of the DDP Message. */
  readonly last: boolean;
  readonly dv: DdpVersion;
  /** RsvdULP, 8 bits, owned by the ULP (RDMAP puts its control field here). */
  readonly rsvdUlp: number;
  /** STag, 32 bits. */
  readonly stag: number;
  /** Tagged Offset, 64 bits unsigned. */
  readonly to: bigint;
}

/** Untagged Buffer Model header (§4.3, Figure 5): 18 octets. */
export interface DdpUntaggedHeader {
  readonly tagged: false;
  readonly last: boolean;
  readonly dv: DdpVersion;
  /** RsvdULP, 40 bits as an unsigned number (RDMAP: its control octet, then the 32-bit Invalidate STag). */
  readonly rsvdUlp: number;
  /** Queue Number, 32 bits. */
  readonly qn: number;
  /** Message Sequence Number, 32 bits, starts at 1 per queue (§5.1.2). */
  readonly msn: number;
  /** Message Offset, 32 bits. */
  readonly mo: number;
}

export type DdpHeader = DdpTaggedHeader | DdpUntaggedHeader;

export const DDP_TAGGED_HEADER_LENGTH = 14;
export const DDP_UNTAGGED_HEADER_LENGTH = 18;

/** Access rights of a registered region (RFC 5040 §2.2/§5; RFC 5042). Bit flags. */
export const Access = {
  LocalRead: 1,
  LocalWrite: 2,
  RemoteRead: 4,
  RemoteWrite: 8,
} as const;
export type AccessFlags = number;

/** A registered memory region of the tagged model (§5.1.1). */
export interface MemoryRegion {
  /** STag: 24-bit index << 8 | 8-bit consumer key. */
  readonly stag: number;
  readonly pdId: number;
  /** The caller-owned bytes. Placement writes straight into it. */
  readonly buffer: Uint8Array;
  /** Tagged Offset of buffer[0]: 0n for zero-based regions, the chosen base for address-based ones. */
  readonly baseTo: bigint;
  readonly length: number;
  readonly access: AccessFlags;
  /** false once invalidated (locally or remotely) or deregistered. */
  readonly valid: boolean;
}

/** DDP errors reported to the ULP (§7.2). Layer is always DDP (1 in RFC 5040 Figure 9). */
export const DdpErrorType = { LocalCatastrophic: 0, TaggedBuffer: 1, UntaggedBuffer: 2, Llp: 3 } as const;
export type DdpErrorType = (typeof DdpErrorType)[keyof typeof DdpErrorType];

/** §7.2's name of each Error Type (type 3 is reserved for the LLP). */
export const DDP_ERROR_TYPE_NAMES: Readonly<Record<DdpErrorType, string>> = {
  0: 'Local Catastrophic',
  1: 'Tagged Buffer Error',
  2: 'Untagged Buffer Error',
  3: 'Reserved for the use by the LLP',
};

/**
 * One row of §7.2's table: Error Type, Error Code, the code's name in `TaggedErrorCode` or
 * `UntaggedErrorCode`, and Description.
 */
export interface DdpErrorInfo {
  readonly type: DdpErrorType;
  readonly code: number;
  readonly key: string;
  readonly description: string;
}

const TAGGED = DdpErrorType.TaggedBuffer;
const UNTAGGED = DdpErrorType.UntaggedBuffer;
const DDP_ERROR_ROWS = [
  { type: DdpErrorType.LocalCatastrophic, code: 0x00, key: 'LocalCatastrophic', description: 'Local Catastrophic' },
  { type: TAGGED, code: 0x00, key: 'InvalidStag', description: 'Invalid STag' },
  { type: TAGGED, code: 0x01, key: 'BaseOrBoundsViolation', description: 'Base or bounds violation' },
  { type: TAGGED, code: 0x02, key: 'StagNotAssociatedWithStream', description: 'STag not associated with DDP Stream' },
  { type: TAGGED, code: 0x03, key: 'ToWrap', description: 'TO wrap' },
  { type: TAGGED, code: 0x04, key: 'InvalidDdpVersion', description: 'Invalid DDP version' },
  { type: UNTAGGED, code: 0x01, key: 'InvalidQn', description: 'Invalid QN' },
  { type: UNTAGGED, code: 0x02, key: 'InvalidMsnNoBufferAvailable', description: 'Invalid MSN - no buffer available' },
  { type: UNTAGGED, code: 0x03, key: 'InvalidMsnRangeNotValid', description: 'Invalid MSN - MSN range is not valid' },
  { type: UNTAGGED, code: 0x04, key: 'InvalidMo', description: 'Invalid MO' },
  { type: UNTAGGED, code: 0x05, key: 'MessageTooLong', description: 'DDP Message too long for available buffer' },
  { type: UNTAGGED, code: 0x06, key: 'InvalidDdpVersion', description: 'Invalid DDP version' },
] as const satisfies readonly DdpErrorInfo[];

/** §7.2's table: every error DDP reports to the ULP, and what a Terminate's DDP layer carries (RFC 5040 Figure 9). */
export const DDP_ERRORS: readonly DdpErrorInfo[] = DDP_ERROR_ROWS;

/** §7.2's Description of an Error Type and Error Code, or undefined for a pair the table does not list. */
export function ddpErrorDescription(type: number, code: number): string | undefined {
  return DDP_ERRORS.find((e) => e.type === type && e.code === code)?.description;
}

/** The §7.2 rows of one Error Type. */
function errorsOf<T extends DdpErrorType>(type: T) {
  return DDP_ERROR_ROWS.filter((e): e is Extract<(typeof DDP_ERROR_ROWS)[number], { type: T }> => e.type === type);
}

/** §7.2 error codes for the Tagged Buffer Model (type 1). */
export const TaggedErrorCode = codesByKey(errorsOf(TAGGED), 'code');

/** §7.2 error codes for the Untagged Buffer Model (type 2). */
export const UntaggedErrorCode = codesByKey(errorsOf(UNTAGGED), 'code');

/** A DDP-detected error on an incoming segment (§7.1): nothing of the segment was placed. */
export interface DdpErrorEvent {
  /** 'ddp' for §7.2 errors; 'rdmap' when the ULP's `ulpCheck` refused the segment. */
  readonly layer: 'ddp' | 'rdmap';
  /** DdpErrorType for layer 'ddp'; RDMAP's error type (RFC 5040 §4.8) for layer 'rdmap'. */
  readonly type: number;
  readonly code: number;
  readonly message: string;
  /** The offending segment's DDP header, decoded (undefined if too short to decode). */
  readonly header: DdpHeader | undefined;
  /** Length of the offending DDP segment (header + payload), for the Terminate's DDP Segment Length (RFC 5040 §4.8). */
  readonly segmentLength: number;
  /** The raw header octets (up to 18; for RDMAP's Terminate "DDP Segment Header" copy, RFC 5040 §4.8). */
  readonly headerBytes: Uint8Array;
  /** For untagged headers, the RDMAP header octets after the DDP header if present (up to 28, RFC 5040 §4.8). */
  readonly ulpHeaderBytes: Uint8Array;
}

/** A tagged segment landed in a region (§5.1.1). Emitted after its bytes are written. */
export interface PlacementEvent {
  readonly stag: number;
  readonly to: bigint;
  readonly length: number;
  readonly last: boolean;
  readonly rsvdUlp: number;
}

/** A complete DDP Message (§5.4 delivery): all of its bytes placed, L=1 segment included. */
export type DeliveryEvent = TaggedDeliveryEvent | UntaggedDeliveryEvent;

export interface TaggedDeliveryEvent {
  readonly tagged: true;
  readonly stag: number;
  /** TO of the L=1 segment's end; the message's extent is what its segments placed. */
  readonly rsvdUlp: number;
  /** Octets placed by this message (sum over its segments, counted since the previous L=1 on the stream). */
  readonly length: number;
  /**
   * The DDP Segment that completed the message (its header first), as the LLP handed it up, for a ULP
   * that must copy its header into a Terminate (RFC 5040 §4.8). Valid only while the event is handled.
   */
  readonly segment: Ulpdu;
}

export interface UntaggedDeliveryEvent {
  readonly tagged: false;
  readonly qn: number;
  readonly msn: number;
  /** Message length: highest MO + length of the L=1 segment. */
  readonly length: number;
  readonly rsvdUlp: number;
  /** The receive buffer the message was placed into, as posted. */
  readonly buffer: Uint8Array;
  /** The id given at `postReceive`. */
  readonly receiveId: unknown;
  /** The DDP Segment that completed the message, as for tagged messages. Valid only while handled. */
  readonly segment: Ulpdu;
}

/**
 * The ULP's check of an incoming segment before placement (RDMAP validates its opcode and the
 * RsvdULP fields here). Return undefined to accept, or an error to report instead of placing
 * (then DDP places nothing and emits the error with `layer: 'rdmap'`). Runs after the DV check and
 * before the STag/bounds (tagged) or QN/MSN/MO (untagged) checks.
 */
export type UlpSegmentCheck = (
  header: DdpHeader,
  payloadLength: number,
  /** For tagged segments: the region the STag names, if it exists, is valid and is this stream's PD. */
  region: MemoryRegion | undefined,
) => UlpCheckFailure | undefined;
/**
 * What a ULP accepts without running its check (`ulpCheck`), by the segment's first RsvdULP octet (RDMAP:
 * its control octet, RFC 5040 §4.1) — data, not a call, so the common segment costs DDP no upcall before
 * placement. DDP places such a segment once its own §7.1 checks pass and asks `ulpCheck` about every other
 * one. The ULP owns the tables and changes them as its state changes (RDMAP clears them when it stops
 * placing, RFC 5040 §5.4, so every later segment meets its check).
 */
export interface UlpAcceptTable {
  /** Tagged, 256 entries: the access bits the region must grant (e.g. `Access.RemoteWrite`); 0 asks `ulpCheck`. */
  readonly tagged: Uint8Array;
  /** Untagged, one 256-entry table per QN: 1 accepts, 0 asks `ulpCheck`. */
  readonly untagged: readonly Uint8Array[];
}

export interface UlpCheckFailure {
  readonly layer: 'rdmap';
  readonly type: number;
  readonly code: number;
  readonly message: string;
}

export interface DdpStreamOptions {
  /** IETF (DV=1) or RDMA Consortium (DV=0). Default `ietf`. */
  readonly profile?: DdpProfile;
  /** Protection domain this stream belongs to: only its STags may be used here (§8.2). */
  readonly pdId: number;
  /** The STag table tagged segments are checked against. */
  readonly stags: StagTableApi;
  /** Number of untagged queues (QN 0..n-1). RDMAP uses 3. Default 1. */
  readonly queues?: number;
  /** Optional ULP check run on every incoming segment before any byte is placed. */
  readonly ulpCheck?: UlpSegmentCheck;
  /** With `ulpCheck`: the segments it accepts without being asked (see `UlpAcceptTable`). */
  readonly ulpAccepts?: UlpAcceptTable;
  /**
   * What the LLP promises (its connection's capabilities). Ordered LLPs get the strict MO check (each
   * segment continues where the last ended); unreliable ones have duplicates of completed messages
   * dropped instead of reported. Default: reliable and ordered (RFC 5041 §3).
   */
  readonly llpCapabilities?: { readonly reliable: boolean; readonly ordered: boolean };
  /**
   * Messages the transmit queue holds before they are handed to the LLP (the LLP pushing back). A send
   * beyond it is refused with `DdpSendQueueFullError`; callers watch `sendQueueLength` (or count the
   * `onHanded` callbacks) to stay below it. Default 1024.
   */
  readonly maxSendQueue?: number;
  /**
   * Untagged messages the LLP exchanged for the ULP at setup, by QN (`LlpSetupInfo.startupMessages`):
   * each one sent moves that queue's first outgoing MSN on by one, each one received its first expected
   * MSN (RFC 5041 §5.1.2 counts every message on a queue from 1).
   */
  readonly startupMessages?: { readonly sent: readonly number[]; readonly received: readonly number[] };
  /**
   * Hold the LLP's ULPDUs (the LLP keeps them, per its contract) until `start()`: a ULP posts its receive
   * buffers first (RFC 5040 §6.1, the rdma_cm order). Default false: DDP takes ULPDUs at once.
   */
  readonly startPaused?: boolean;
  /** Called once, as the first incoming segment reaches DDP (RFC 5040 §6.1: the responder's go-ahead). */
  readonly onFirstSegment?: () => void;
  /**
   * The one consumer that must see every Delivery (RDMAP), called directly and first, with no subscription
   * in between (the hot path is direct calls); `delivery$` carries the same events to observers after it.
   * A DDP Stream built for a ULP (`createDdp`) must honour it, as it honours `ulpCheck`.
   */
  readonly onDelivery?: (e: DeliveryEvent) => void;
}

/**
 * Hears, once, how a message given to `sendTaggedWith`/`sendUntaggedWith` ended: `error` undefined once the
 * LLP holds no reference to its payload any more (sent), else why it was not sent. `msn` is the message's
 * MSN (untagged, RFC 5041 §5.1.2), −1 for a tagged one. May be called from inside the call that sent it.
 */
export interface DdpSendSink {
  ddpSent(error: unknown, msn: number): void;
}

/** An untagged send: settles as `sendUntagged` says; its MSN is known at once (RFC 5041 §5.1.2). */
export interface UntaggedSend extends Promise<number> {
  /** The message's MSN; −1 when the send was refused (the promise rejects). */
  readonly msn: number;
}

/** STag table surface DDP needs (implemented by `StagTable`). */
export interface StagTableApi {
  lookup(stag: number): MemoryRegion | undefined;
}

export type DdpStreamState = 'open' | 'error' | 'closing' | 'closed';

/** A receive buffer that never got a complete message: handed back at teardown (§6.2) or by `flushReceives`. */
export interface FlushedReceive {
  readonly qn: number;
  readonly msn: number;
  readonly buffer: Uint8Array;
  readonly receiveId: unknown;
  /** Octets already placed into it by segments of a message that never completed. */
  readonly placed: number;
}

/** How a DDP Stream ended (§6.2). */
export interface DdpCloseEvent {
  readonly graceful: boolean;
  /** The LLP's error, or the DDP error that put the stream into `error` state. */
  readonly error?: Error;
  /** Posted receive buffers that were never completed, in MSN order per queue. */
  readonly flushed: readonly FlushedReceive[];
}

/** One DDP Stream over one LLP stream (§6); `DdpStream` implements it. */
export interface DdpStreamApi {
  readonly llp: LlpStream;
  readonly profile: DdpProfile;
  readonly state: DdpStreamState;
  /** Largest payload per segment: MULPDU minus the header (§5.2). */
  maxPayload(tagged: boolean): number;

  /**
   * Send a tagged DDP Message (§5.1.1): segmented to MULPDU, TO advancing per segment, L=1 on the last.
   * Messages go out whole and in call order. Resolves once the LLP holds no reference to `payload`;
   * `onHanded` runs (synchronously, once) when the last segment has been handed to the LLP.
   */
  sendTagged(
    stag: number,
    to: bigint,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): Promise<void>;
  /**
   * `sendTagged` without a promise: `sink.ddpSent` hears how the message ended (a ULP's send-queue entry
   * can be its own sink, so nothing is allocated per message for the outcome). Throws at once, without
   * calling the sink, when the message cannot be queued.
   */
  sendTaggedWith(
    stag: number,
    to: bigint,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    sink: DdpSendSink,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): void;
  /**
   * Send an untagged DDP Message on queue `qn` (§5.1.2) with that queue's next MSN (from 1).
   * Resolves with the MSN once the LLP holds no reference to `payload`; `onHanded` as for `sendTagged`.
   */
  sendUntagged(
    qn: number,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): UntaggedSend;
  /** `sendUntagged` without a promise, as `sendTaggedWith`; returns the message's MSN. */
  sendUntaggedWith(
    qn: number,
    payload: readonly Uint8Array[],
    rsvdUlp: number,
    sink: DdpSendSink,
    signal?: AbortSignal,
    onHanded?: () => void,
  ): number;

  /** Lets the LLP's ULPDUs through when the stream was made with `startPaused` (else a no-op). */
  start(): void;
  /** Messages queued and not yet handed to the LLP in full (bounded by `maxSendQueue`). */
  readonly sendQueueLength: number;
  /** Post a receive buffer on queue `qn`; consumed in MSN order. */
  postReceive(qn: number, buffer: Uint8Array, receiveId?: unknown): void;
  /** Receive buffers posted and not yet consumed on `qn`. */
  postedReceives(qn: number): number;

  /** Take back every posted, not completed receive buffer of `qn` (all queues if omitted), in MSN order. */
  flushReceives(qn?: number): FlushedReceive[];

  readonly placement$: Observable<PlacementEvent>;
  readonly delivery$: Observable<DeliveryEvent>;
  /** Each §7 error on an incoming segment. After the first, the stream is in `error` state: incoming segments are dropped, sending still works (so the ULP can send its Terminate). */
  readonly error$: Observable<DdpErrorEvent>;
  /** Emits once when the LLP stream has ended (graceful or not), then completes. */
  readonly closed$: Observable<DdpCloseEvent>;
  /** Graceful teardown of the LLP stream (§6.2). */
  close(signal?: AbortSignal): Promise<void>;
  /** Abortive teardown of the LLP stream. */
  abort(reason?: Error): void;
}
