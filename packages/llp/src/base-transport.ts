import type { LlpCapabilities } from './capabilities.js';
import type {
  LlpAddress,
  LlpConnection,
  LlpConnectOptions,
  LlpListener,
  LlpListenOptions,
  LlpTransport,
} from './connection.js';

/**
 * The frame of an LLP transport whose options are resolved once, at construction, and whose
 * `capabilities` (what its connections promise) follow from them. A plugin passes its resolved options
 * and the function that derives the capabilities, and supplies `name`, `connect` and `listen`.
 */
export abstract class BaseLlpTransport<Options> implements LlpTransport {
  abstract readonly name: string;
  readonly capabilities: LlpCapabilities;

  protected constructor(
    /** The transport's options, defaults applied and checked. */
    readonly options: Options,
    capabilitiesOf: (options: Options) => LlpCapabilities,
  ) {
    this.capabilities = capabilitiesOf(options);
  }

  abstract connect(address: LlpAddress, options?: LlpConnectOptions): Promise<LlpConnection>;
  abstract listen(address: LlpAddress, options?: LlpListenOptions): Promise<LlpListener>;
}
