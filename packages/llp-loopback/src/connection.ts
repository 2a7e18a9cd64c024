import { BaseLlpConnection, type LlpAddress, type LlpCapabilities, type LlpError, type LlpSetupInfo } from '@rddp/llp';
import type { LoopbackStream } from './stream.js';

let nextId = 1;

/** One end of an in-process LLP connection. */
export class LoopbackConnection extends BaseLlpConnection<LoopbackStream> {
  readonly id = `loopback-${nextId++}`;
  readonly transport = 'loopback';

  constructor(
    role: 'initiator' | 'responder',
    capabilities: LlpCapabilities,
    readonly streams: readonly LoopbackStream[],
    localAddress: LlpAddress,
    remoteAddress: LlpAddress,
    setup: LlpSetupInfo,
  ) {
    super({ role, capabilities, localAddress, remoteAddress, setup });
    for (const s of streams) s.onClosed = (e) => this.streamClosed(e);
  }

  /** Sets the MULPDU of every stream, both directions (fault injection / MSS-change tests). */
  setMulpdu(mulpdu: number): void {
    for (const s of this.streams) {
      s.setMulpdu(mulpdu);
      s.peer.setMulpdu(mulpdu);
    }
  }

  /** Fault injection: stall or restart this side's reading on every stream. */
  stallReader(on: boolean): void {
    for (const s of this.streams) s.stall(on);
  }

  abort(reason?: LlpError): void {
    for (const s of this.streams) s.abort(reason);
  }
}
