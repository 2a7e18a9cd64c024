/**
 * The TCP congestion control of this transport's connections (Linux `TCP_CONGESTION`, through
 * `@rddp/writev`; Node has no call for it). Unset, a connection runs the system's default
 * (`net.ipv4.tcp_congestion_control`). Congestion control decides how many octets one connection keeps in
 * flight, and so what one MPA connection moves: on loopback, BBR's model (a minimum RTT near zero) holds
 * a sender to a few segments' worth in flight where CUBIC fills the receive window (docs/PERFORMANCE.md,
 * "Congestion control").
 */
import { createRequire } from 'node:module';
import type { Socket } from 'node:net';
import { getSystemErrorName } from 'node:util';
import { CapabilityError, InvalidArgumentError } from '@rddp/llp';
import { socketFd } from './tx-direct.js';

type CongestionControlCall = typeof import('@rddp/writev').congestionControl;

/** `@rddp/writev`'s `congestionControl` where the binding is built (POSIX); undefined otherwise. */
const binding: CongestionControlCall | undefined = (() => {
  if (process.platform === 'win32') return undefined;
  try {
    const m = createRequire(import.meta.url)('@rddp/writev') as { congestionControl?: CongestionControlCall };
    return typeof m.congestionControl === 'function' ? m.congestionControl : undefined;
  } catch {
    return undefined;
  }
})();

/** Whether `v` can name a kernel congestion control: 1..15 octets (TCP_CA_NAME_MAX), as `sysctl` lists them. */
export function isCongestionControlName(v: unknown): v is string {
  return typeof v === 'string' && /^[a-z0-9_]{1,15}$/.test(v);
}

/** `congestionControl`'s value checked (undefined: the system's). Throws where it cannot be applied. */
export function congestionControlOption(v: unknown): string | undefined {
  if (v === undefined) return undefined;
  if (!isCongestionControlName(v))
    throw new InvalidArgumentError(
      `congestionControl must name a kernel TCP congestion control ('cubic', 'reno', 'bbr', ...), got ${String(v)}`,
    );
  if (binding === undefined)
    throw new CapabilityError(
      `congestionControl '${v}' needs the @rddp/writev native build (Linux TCP_CONGESTION); it is not installed here`,
    );
  return v;
}

/**
 * Sets `name` on `socket` (once it has a descriptor) and returns the algorithm then in effect; throws a
 * `CapabilityError` naming the kernel's reason when it refuses.
 */
export function applyCongestionControl(socket: Socket, name: string): string {
  const fd = socketFd(socket);
  if (binding === undefined || fd < 0)
    throw new CapabilityError(`congestionControl '${name}': the socket has no descriptor to set it on`);
  const r = binding(fd, name);
  if (typeof r === 'string') return r;
  throw new CapabilityError(`congestionControl '${name}': the kernel refused it (${errnoText(r)})`);
}

/** The congestion control `socket` runs ('cubic', 'bbr', ...), or undefined where it cannot be read. */
export function congestionControlOf(socket: Socket): string | undefined {
  const fd = socketFd(socket);
  if (binding === undefined || fd < 0) return undefined;
  const r = binding(fd);
  return typeof r === 'string' ? r : undefined;
}

function errnoText(errno: number): string {
  let code = `errno ${-errno}`;
  try {
    code = getSystemErrorName(errno);
  } catch {}
  if (code === 'ENOENT') return 'ENOENT: not an algorithm it has loaded, see net.ipv4.tcp_available_congestion_control';
  if (code === 'EPERM') return 'EPERM: not in net.ipv4.tcp_allowed_congestion_control, and no CAP_NET_ADMIN';
  return code;
}
