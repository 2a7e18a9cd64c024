import type { LlpListener } from '@rddp/llp';

/** Listeners of loopback transports, keyed by `host:port`. Transports given the same network see each other. */
export class LoopbackNetwork {
  readonly listeners = new Map<string, LlpListener & { accept: unknown }>();
  private nextPort = 49152;

  key(host: string | undefined, port: number | undefined): string {
    return `${host ?? 'loopback'}:${port ?? 0}`;
  }

  /** A port not bound on `host`. */
  freePort(host: string | undefined): number {
    for (;;) {
      const p = this.nextPort++;
      if (this.nextPort > 65535) this.nextPort = 49152;
      if (!this.listeners.has(this.key(host, p))) return p;
    }
  }
}

/** The process-wide default network. */
export const defaultNetwork = new LoopbackNetwork();
