/**
 * What the stack reads of the LLP it composes a layer on: a connection (its role, capabilities, setup and
 * streams) or a bare LLP stream.
 */
import type { DdpProfile } from '@rddp/ddp';
import type { LlpConnection, LlpStream } from '@rddp/llp';
import { NoSuchLlpStreamError } from './errors.js';
import type { StackDefaults } from './tokens.js';

export function isConnection(llp: LlpConnection | LlpStream): llp is LlpConnection {
  return 'streams' in llp;
}

export function profileOf(defaults: StackDefaults, connection: LlpConnection | undefined): DdpProfile {
  const p = defaults.profile;
  if (typeof p === 'function') return connection ? p(connection) : 'ietf';
  return p ?? 'ietf';
}

/**
 * The LLP stream a request names (`stream`, default 0) and its connection, the request without `stream`,
 * and what the options of every layer start from: the DDP profile and the protection domain.
 */
export function target<R extends { readonly stream?: number }>(
  llp: LlpConnection | LlpStream,
  request: R,
  defaults: StackDefaults,
): {
  stream: LlpStream;
  connection: LlpConnection | undefined;
  rest: Omit<R, 'stream'>;
  base: { profile: DdpProfile; pdId: number };
} {
  const { stream: index, ...rest } = request;
  let stream: LlpStream;
  let connection: LlpConnection | undefined;
  if (isConnection(llp)) {
    const s = llp.streams[index ?? 0];
    if (!s) throw new NoSuchLlpStreamError(index ?? 0);
    [stream, connection] = [s, llp];
  } else stream = llp;
  return { stream, connection, rest, base: { profile: profileOf(defaults, connection), pdId: defaults.pdId ?? 1 } };
}
