/**
 * One LLP connection = one SCTP association carrying DDP (RFC 5043).
 *
 * Setup: the association comes up (with the Adaptation Layer Indication checked below, in paths.ts),
 * then the initiator sends Session Initiate with the ULP's private data and the responder answers
 * Session Accept or Session Reject with its own (PPID 17).
 * Data: DDP Segments, one per SCTP user message (PPID 16), DDP Stream k on SCTP stream k, ordered.
 * Teardown: a stream closes with Session Terminate both ways (ordered after its data, so everything sent
 * before is delivered); once every stream is closed the initiator ends the association with SHUTDOWN
 * (RFC 4960 §9.2). Abort is association-wide: ABORT (RFC 4960 §9.1).
 */
import {
  CapabilityError,
  ConnectionAbortedError,
  ConnectionRefusedError,
  ConnectionRejectedError,
  type LlpAddress,
  type LlpCapabilities,
  type LlpCloseEvent,
  type LlpConnection,
  type LlpError,
  type LlpLogger,
  LlpProtocolError,
  type LlpSetupInfo,
  type LlpStreamState,
  LlpTimeoutError,
  OnceSubject,
  ResourceLimitError,
  StreamClosedError,
  withAbort,
} from '@rddp/llp';
import type { Observable } from 'rxjs';
import { MIN_MULPDU, mulpduFor, type ResolvedOptions, type RtoParameters } from './options.js';
import { type PkgAssociation, peerOutboundStreams, type StreamSchedulerName, shimAssociation } from './pkg.js';
import {
  decodeSessionControl,
  encodeSessionControl,
  PPID_DDP_SEGMENT,
  PPID_DDP_STREAM_SESSION_CONTROL,
  SESSION_SETUP_STREAM,
  SessionFunction,
  sessionFunctionName,
} from './rfc5043.js';
import { type QueueItem, SendQueue } from './send-queue.js';
import { SctpLlpStream, type StreamHost } from './stream.js';

export interface ConnectionTuning {
  /** The MULPDU asked for; the effective one also fits the peer's receive window. */
  readonly mulpdu: number;
  readonly pmtu: number;
  readonly maxPrivateData: number;
  readonly shutdownTimeoutMs: number;
  readonly closeTimeoutMs: number;
  readonly deadPeerTimeoutMs: number;
  /** No user message either way for this long: abort (0 = never). */
  readonly idleTimeoutMs: number;
  /** RTO.Initial, RTO.Min, RTO.Max for the association (RFC 4960 §15). */
  readonly rto: RtoParameters;
  /** The stream scheduler (RFC 8260 §3). */
  readonly scheduler: StreamSchedulerName;
}

/**
 * The tuning of a connection a transport (or its listener) with these options makes over a path whose
 * SCTP packets may be `pmtu` octets (options.ts `pathPacketSize`).
 */
export function connectionTuning(o: ResolvedOptions, pmtu: number): ConnectionTuning {
  return {
    mulpdu: mulpduFor(o, pmtu),
    pmtu,
    maxPrivateData: o.maxPrivateData,
    shutdownTimeoutMs: o.shutdownTimeoutMs,
    closeTimeoutMs: o.closeTimeoutMs,
    deadPeerTimeoutMs: o.deadPeerTimeoutMs,
    idleTimeoutMs: o.idleTimeoutMs,
    rto: o.rto,
    scheduler: o.scheduler,
  };
}

export interface ConnectionConfig {
  readonly id: string;
  readonly role: 'initiator' | 'responder';
  readonly association: PkgAssociation;
  readonly capabilities: LlpCapabilities;
  readonly localAddress: LlpAddress;
  readonly remoteAddress: LlpAddress;
  readonly tuning: ConnectionTuning;
  readonly logger: LlpLogger;
  /** Streams the initiator asked for (the responder takes what the association negotiated). */
  readonly streams?: number;
  /** Runs once the association is gone: release its path and socket. */
  readonly onEnded: () => void;
}

type Phase = 'associating' | 'session' | 'established' | 'ended';
type EndKind = 'shutdown' | 'peer-shutdown' | 'abort-local' | 'abort-remote' | 'lost';

interface Waiter<T> {
  resolve(value: T): void;
  reject(error: unknown): void;
}

export class SctpConnection implements LlpConnection, StreamHost {
  readonly transport = 'sctp';
  readonly id: string;
  readonly role: 'initiator' | 'responder';
  readonly capabilities: LlpCapabilities;
  readonly localAddress: LlpAddress;
  readonly remoteAddress: LlpAddress;
  streams: SctpLlpStream[] = [];
  setup: LlpSetupInfo = { localPrivateData: new Uint8Array(0), remotePrivateData: new Uint8Array(0), negotiated: {} };
  /** Counters for tests and debug logs. */
  readonly stats = { invalidStreamId: 0 };

  private readonly config: ConnectionConfig;
  private queue: SendQueue | undefined;
  private phase: Phase = 'associating';
  private teardown: 'local' | 'remote' | undefined;
  /** The whole connection is going down (close, reject, SHUTDOWN either way). */
  private closingAll = false;
  private ending = false;
  private readonly closedSubject = new OnceSubject<LlpCloseEvent>();
  private upWaiter: Waiter<void> | undefined;
  private sessionWaiter: Waiter<Uint8Array> | undefined;
  private pendingFailure: LlpError | undefined;
  private readonly timers = new Set<NodeJS.Timeout>();
  /** User messages received or queued (for `idleTimeoutMs`). */
  private activity = 0;

  constructor(config: ConnectionConfig) {
    this.config = config;
    this.id = config.id;
    this.role = config.role;
    this.capabilities = config.capabilities;
    this.localAddress = config.localAddress;
    this.remoteAddress = config.remoteAddress;
    shimAssociation(this.association, this.tuning.pmtu, this.tuning.rto, this.tuning.scheduler);
    const a = this.association;
    a.on('COMMUNICATION UP', () => this.onUp());
    a.on('DATA ARRIVE', (streamId: number) => this.onData(streamId));
    a.on('COMMUNICATION LOST', (event?: string, causes?: { cause?: string; abort_reason?: string }[]) => {
      const why = (causes ?? [])
        .map((c) => c.abort_reason || c.cause)
        .filter(Boolean)
        .join(', ');
      if (event === 'abort') {
        this.onEnd(
          'abort-remote',
          new ConnectionAbortedError(`the peer aborted the association${why ? `: ${why}` : ''}`),
        );
      } else {
        this.onEnd('lost', new ConnectionAbortedError('the association was lost'));
      }
    });
    a.on('SHUTDOWN COMPLETE', () => this.onEnd('shutdown'));
    // Raw chunk events, seen after the package has processed the chunk.
    a.on('shutdown', () => this.onPeerShutdown());
    a.on('COMMUNICATION ERROR', (causes: unknown) => this.logger.debug('sctp.peer-error', { id: this.id, causes }));
  }

  get state(): LlpStreamState {
    if (this.phase === 'ended') return 'closed';
    return this.closingAll || this.ending ? 'closing' : 'open';
  }

  get closed$(): Observable<LlpCloseEvent> {
    return this.closedSubject.observable;
  }

  private get association(): PkgAssociation {
    return this.config.association;
  }
  private get tuning(): ConnectionTuning {
    return this.config.tuning;
  }
  private get logger(): LlpLogger {
    return this.config.logger;
  }

  /** The association's TCB, for tests and diagnostics. */
  get sctpAssociation(): PkgAssociation {
    return this.association;
  }

  // ---- setup ----------------------------------------------------------------------------------

  /** Resolves when the association is up (COMMUNICATION UP), rejects when it fails first. */
  associated(): Promise<void> {
    if (this.pendingFailure) return Promise.reject(this.pendingFailure);
    if (this.phase !== 'associating') return Promise.resolve();
    return new Promise((resolve, reject) => {
      this.upWaiter = { resolve, reject };
    });
  }

  /** Initiator: sends Session Initiate and resolves with the responder's private data on Session Accept. */
  initiate(privateData: Uint8Array): Promise<Uint8Array> {
    this.setup = { ...this.setup, localPrivateData: privateData };
    const p = this.waitSession();
    this.sendControl(SESSION_SETUP_STREAM, SessionFunction.Initiate, privateData);
    return p;
  }

  /** Responder: resolves with the initiator's private data once Session Initiate arrives. */
  sessionRequest(): Promise<Uint8Array> {
    return this.waitSession();
  }

  /** Responder: accepts with Session Accept; the connection is established. */
  accept(privateData: Uint8Array, remotePrivateData: Uint8Array): void {
    this.setup = { localPrivateData: privateData, remotePrivateData, negotiated: { streams: this.streams.length } };
    this.sendControl(SESSION_SETUP_STREAM, SessionFunction.Accept, privateData);
    this.phase = 'established';
    this.logger.debug('sctp.session-accepted', { id: this.id, streams: this.streams.length });
  }

  /** Responder: rejects with Session Reject; the initiator then ends the association. */
  reject(privateData: Uint8Array): void {
    this.sendControl(SESSION_SETUP_STREAM, SessionFunction.Reject, privateData);
    this.teardown = 'local';
    this.ending = true;
    this.logger.debug('sctp.session-rejected', { id: this.id });
    this.arm(this.tuning.shutdownTimeoutMs, () => this.endAssociation(true));
  }

  /** Fails the setup (or the connection) with `error`, aborting the association. */
  fail(error: LlpError): void {
    if (this.phase === 'ended') return;
    this.pendingFailure ??= error;
    this.teardown ??= 'local';
    try {
      this.association.ABORT(error.message);
    } catch {
      // The package has already torn the association down.
    }
    this.onEnd('abort-local', error);
  }

  private waitSession(): Promise<Uint8Array> {
    if (this.pendingFailure) return Promise.reject(this.pendingFailure);
    return new Promise((resolve, reject) => {
      this.sessionWaiter = { resolve, reject };
    });
  }

  private onUp(): void {
    if (this.phase !== 'associating') return;
    const a = this.association;
    // RFC 4960 §5.1.1: this side sends on min(local OS, peer MIS) streams (the association's OS; the
    // package's socket.OS is wrong) and receives on min(local MIS, peer OS). A DDP Stream needs both
    // directions (RFC 5043 §4), so there are as many DDP Streams as the smaller of the two.
    const n = Math.min(a.OS, a.MIS, peerOutboundStreams(a) ?? a.OS);
    const wanted = this.config.streams ?? n;
    if (n < wanted) {
      this.fail(
        new ResourceLimitError(
          `the association's ${n} streams both ways, RFC 4960 §5.1.1`,
          `a connection of ${wanted} DDP Streams`,
        ),
      );
      return;
    }
    // A whole ULPDU must fit the peer's window (its fragments are held until it is whole, RFC 4960 §6.9),
    // with room left for another stream's packet: one packet, or a quarter of a small window.
    const mulpdu = Math.min(this.tuning.mulpdu, a.peer_rwnd - Math.min(this.tuning.pmtu, Math.floor(a.peer_rwnd / 4)));
    if (mulpdu < MIN_MULPDU) {
      this.fail(
        new CapabilityError(
          `the peer's receive window of ${a.peer_rwnd} octets leaves a MULPDU of ${mulpdu} (< ${MIN_MULPDU})`,
        ),
      );
      return;
    }
    this.queue = new SendQueue(a, {
      deadPeerMs: this.tuning.deadPeerTimeoutMs,
      onFatal: (e) =>
        this.fail(e instanceof LlpTimeoutError ? e : new LlpProtocolError(`sctp: ${e.message}`, { cause: e })),
    });
    const hwm = Math.max(2 * mulpdu, 128 * 1024);
    this.streams = Array.from({ length: wanted }, (_, i) => new SctpLlpStream(i, mulpdu, this, hwm));
    this.phase = 'session';
    this.logger.debug('sctp.associated', {
      id: this.id,
      role: this.role,
      streams: wanted,
      mulpdu,
      peerRwnd: a.peer_rwnd,
    });
    this.watchIdle();
    const w = this.upWaiter;
    this.upWaiter = undefined;
    w?.resolve();
  }

  // ---- receive ----------------------------------------------------------------------------------

  private onData(streamId: number): void {
    const m = this.association.RECEIVE();
    if (!m || this.phase === 'ended') return;
    this.activity++;
    const stream = this.streams[streamId];
    if (!stream) {
      // RFC 4960 §6.5: report "Invalid Stream Identifier" and discard (the package does not check).
      this.stats.invalidStreamId++;
      this.logger.debug('sctp.invalid-stream', { id: this.id, streamId, streams: this.streams.length });
      this.association.ERROR([{ cause: 'INVALID_STREAM_IDENTIFIER', stream_id: streamId }]);
      return;
    }
    if (m.ppid === PPID_DDP_SEGMENT) {
      if (this.phase !== 'established' && !(this.role === 'initiator' && this.phase === 'session')) {
        this.violation('a DDP Segment arrived before the DDP Stream session was accepted (RFC 5043)');
        return;
      }
      stream.segment(m);
      return;
    }
    if (m.ppid === PPID_DDP_STREAM_SESSION_CONTROL) {
      this.onSessionControl(stream, m);
      return;
    }
    this.violation(`a user message with PPID ${m.ppid}: DDP over SCTP carries PPIDs 16 and 17 only (RFC 5043 §5.2)`);
  }

  private onSessionControl(stream: SctpLlpStream, message: Buffer): void {
    let msg: ReturnType<typeof decodeSessionControl>;
    try {
      msg = decodeSessionControl(message);
    } catch (e) {
      this.violation((e as Error).message);
      return;
    }
    const name = sessionFunctionName(msg.fn);
    this.logger.debug('sctp.session-control', {
      id: this.id,
      fn: name,
      stream: stream.id,
      privateData: msg.privateData.length,
    });
    const setup =
      msg.fn === SessionFunction.Initiate || msg.fn === SessionFunction.Accept || msg.fn === SessionFunction.Reject;
    if (setup) {
      const expected =
        this.role === 'responder' ? msg.fn === SessionFunction.Initiate : msg.fn !== SessionFunction.Initiate;
      if (!expected || this.phase !== 'session' || stream.id !== SESSION_SETUP_STREAM || !this.sessionWaiter) {
        this.violation(`unexpected ${name} on stream ${stream.id} (RFC 5043)`);
        return;
      }
      const w = this.sessionWaiter;
      this.sessionWaiter = undefined;
      if (msg.fn === SessionFunction.Reject) {
        const e = new ConnectionRejectedError(
          'the responder rejected the DDP Stream session (RFC 5043 Session Reject)',
          msg.privateData,
        );
        this.pendingFailure = e;
        this.teardown = 'remote';
        w.reject(e);
        this.endAssociation(false);
        return;
      }
      if (msg.fn === SessionFunction.Accept) {
        this.setup = {
          localPrivateData: this.setup.localPrivateData,
          remotePrivateData: msg.privateData,
          negotiated: { streams: this.streams.length },
        };
        this.phase = 'established';
      }
      w.resolve(msg.privateData);
      return;
    }
    // Session Terminate: the peer ends this DDP Stream after everything it sent on it.
    if (this.phase === 'associating') {
      this.violation('Session Terminate before the session was set up (RFC 5043)');
      return;
    }
    if (stream.state === 'closed') return;
    if (stream.state === 'closing') {
      stream.end({ graceful: true, initiator: 'local' });
      return;
    }
    this.teardown ??= 'remote';
    this.sendControl(stream.id, SessionFunction.Terminate);
    stream.end({ graceful: true, initiator: 'remote' });
  }

  /** The peer broke RFC 5043: ABORT with a Protocol Violation cause (RFC 4960 §3.3.10.13). */
  violation(text: string): void {
    if (this.phase === 'ended') return;
    this.logger.debug('sctp.protocol-violation', { id: this.id, text });
    this.teardown ??= 'local';
    try {
      this.association._abort({ error_causes: [{ cause: 'PROTOCOL_VIOLATION', additional_information: text }] });
    } catch {
      // Already torn down by the package.
    }
    this.onEnd('abort-local', new LlpProtocolError(text));
  }

  // ---- StreamHost -----------------------------------------------------------------------------

  enqueue(item: QueueItem): void {
    if (!this.queue) {
      item.done?.(new StreamClosedError('the association is not up'));
      return;
    }
    this.activity++;
    this.queue.push(item);
  }

  terminate(stream: SctpLlpStream): void {
    this.teardown ??= 'local';
    this.sendControl(stream.id, SessionFunction.Terminate);
    this.arm(this.tuning.closeTimeoutMs, () => {
      if (stream.state === 'closing') {
        this.fail(
          new LlpTimeoutError(
            `no Session Terminate from the peer on stream ${stream.id} within ${this.tuning.closeTimeoutMs} ms`,
          ),
        );
      }
    });
  }

  adjustWindow(delta: number): void {
    const a = this.association;
    a.reassembly.rwnd += delta;
    // Window update (RFC 4960 §6.2): the package only reports its window when DATA arrives.
    if (delta > 0 && a.state === 'ESTABLISHED') a._sack();
  }

  streamEnded(_stream: SctpLlpStream): void {
    if (this.phase === 'ended' || this.streams.some((s) => s.state !== 'closed')) return;
    if (this.role === 'initiator') this.endAssociation(false);
    else this.arm(this.tuning.shutdownTimeoutMs, () => this.endAssociation(true));
  }

  // ---- teardown -------------------------------------------------------------------------------

  close(signal?: AbortSignal): Promise<void> {
    const done = new Promise<void>((resolve, reject) => {
      this.closedSubject.observable.subscribe((e) =>
        e.graceful ? resolve() : reject(e.error ?? new ConnectionAbortedError('closed abortively')),
      );
    });
    if (this.phase !== 'ended') {
      this.teardown ??= 'local';
      this.closingAll = true;
      if (this.phase !== 'established' || this.streams.length === 0) {
        this.fail(new StreamClosedError('closed before the session was established'));
      } else {
        for (const s of this.streams) if (s.state === 'open') s.close().catch(() => {});
        this.arm(this.tuning.closeTimeoutMs + this.tuning.shutdownTimeoutMs, () =>
          this.fail(new LlpTimeoutError(`graceful close did not finish within ${this.tuning.closeTimeoutMs} ms`)),
        );
      }
    }
    return withAbort(done, signal);
  }

  abort(reason?: LlpError): void {
    if (this.phase === 'ended') return;
    this.teardown ??= 'local';
    this.fail(reason ?? new ConnectionAbortedError('the connection was aborted locally'));
  }

  /**
   * Ends the association once everything sent is acknowledged: SACK what the peer sent, then SHUTDOWN
   * (RFC 4960 §9.2), with a guard timer falling back to ABORT. The package sends SHUTDOWN at once even
   * with data outstanding and never completes it then (docs/SCTP.md), so this waits for both sides to be idle.
   */
  private endAssociation(fallback: boolean): void {
    if (this.phase === 'ended' || (this.ending && !fallback)) return;
    this.ending = true;
    const a = this.association;
    const idle = this.queue?.whenIdle() ?? Promise.resolve();
    void idle.then(() => {
      if (this.phase === 'ended') return;
      this.arm(this.tuning.shutdownTimeoutMs, () => {
        this.logger.debug('sctp.shutdown-timeout', { id: this.id, state: a.state });
        try {
          a.ABORT('SHUTDOWN did not complete');
        } catch {
          // already gone
        }
        this.onEnd('abort-local', new LlpTimeoutError('SHUTDOWN did not complete (RFC 4960 §9.2)'));
      });
      if (a.state !== 'ESTABLISHED') return;
      a._sack();
      // After the SACK's bundling timer, so the peer has nothing outstanding when SHUTDOWN arrives.
      this.arm(0, () => {
        if (this.phase !== 'ended' && a.state === 'ESTABLISHED') a.SHUTDOWN();
      });
    });
  }

  private onPeerShutdown(): void {
    if (this.phase === 'ended') return;
    this.ending = true;
    this.teardown ??= 'remote';
    // RFC 4960 §9.2: after SHUTDOWN the package takes no new SEND (what it queued before still goes);
    // every stream ends as the peer closed.
    for (const s of this.streams) if (s.state !== 'closed') s.end({ graceful: true, initiator: 'remote' });
  }

  private onEnd(kind: EndKind, error?: LlpError): void {
    if (this.phase === 'ended') return;
    const wasPhase = this.phase;
    this.phase = 'ended';
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    const graceful = kind === 'shutdown' || kind === 'peer-shutdown';
    const failure = error ?? new ConnectionAbortedError('the association ended');
    this.queue?.end(graceful ? new StreamClosedError('the association was shut down') : failure);
    const initiator: 'local' | 'remote' = kind === 'abort-local' ? 'local' : 'remote';
    for (const s of this.streams) {
      if (s.state !== 'closed') s.end(graceful ? { graceful, initiator } : { graceful, initiator, error: failure });
    }
    if (wasPhase !== 'established') {
      let setupError: LlpError = this.pendingFailure ?? failure;
      if (this.role === 'initiator' && wasPhase === 'associating' && kind === 'abort-remote') {
        setupError = new ConnectionRefusedError(`the peer refused the association: ${failure.message}`);
      }
      this.pendingFailure ??= setupError;
      this.upWaiter?.reject(setupError);
      this.sessionWaiter?.reject(setupError);
      this.upWaiter = undefined;
      this.sessionWaiter = undefined;
    }
    const events = this.streams.map((s) => s.closeEvent);
    const allGraceful = events.length > 0 && events.every((e) => e?.graceful);
    const firstError = events.find((e) => e && !e.graceful)?.error ?? (allGraceful ? undefined : failure);
    const event: LlpCloseEvent = {
      graceful: allGraceful,
      initiator: this.teardown ?? initiator,
      ...(firstError ? { error: firstError } : {}),
    };
    this.logger.debug('sctp.ended', { id: this.id, kind, graceful: event.graceful, initiator: event.initiator });
    this.closedSubject.fire(event);
    setImmediate(() => this.config.onEnded());
  }

  private sendControl(streamId: number, fn: SessionFunction, privateData?: Uint8Array): void {
    const data = encodeSessionControl(fn, privateData);
    this.enqueue({ streamId, ppid: PPID_DDP_STREAM_SESSION_CONTROL, data, length: data.length });
  }

  /** `idleTimeoutMs`: checked every half of it; no user message for a whole of it ends the connection. */
  private watchIdle(): void {
    const idle = this.tuning.idleTimeoutMs;
    if (idle <= 0) return;
    const step = Math.max(1, Math.floor(idle / 2));
    let seen = this.activity;
    let quiet = 0;
    const check = () => {
      if (this.phase === 'ended') return;
      if (this.activity !== seen || (this.queue?.pending ?? 0) > 0) {
        seen = this.activity;
        quiet = 0;
      } else quiet += step;
      if (quiet >= idle) {
        this.fail(new LlpTimeoutError(`no user message received or sent for ${idle} ms (idleTimeoutMs)`));
        return;
      }
      this.arm(step, check);
    };
    this.arm(step, check);
  }

  private arm(ms: number, fn: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      fn();
    }, ms);
    t.unref();
    this.timers.add(t);
  }
}
