/**
 * `RDDP_CRC32C`: the one pin of the CRC32c backend every transport with a CRC32c digest uses (MPA's CRC,
 * RFC 5044 §4.4; SCTP's checksum, RFC 4960 §6.8). Its names, the package each names, how to get it, and
 * the resolver that picks a backend. A pin is never ignored: a pinned backend that does not load, and a
 * name that is no backend, are errors.
 *
 * Data and pure functions: each transport loads the packages itself (this package loads no backend) and
 * checks each with its entry's `check`.
 */
import { codedError, LlpError } from './errors.js';

/** The environment variable that pins the backend. */
export const CRC32C_PIN_ENV = 'RDDP_CRC32C';

/** The CRC32c check value, of the octets of "123456789" (RFC 3720 §B.4). */
export const CRC32C_CHECK_VALUE = 0xe3069283;
const CHECK_INPUT = new TextEncoder().encode('123456789');

/** `@rddp/crc32c-isal`'s module as the check uses it: CRC32c of a byte range, continuing from `crc`. */
export interface IsalCrc32cModule {
  calculate(bytes: Uint8Array, start: number, end: number, crc: number): number;
}
/** `sse4_crc32`'s module as the check uses it. */
export interface Sse4Crc32Module {
  calculate(bytes: Uint8Array, initial?: number): number;
  readonly hardware_support: boolean;
}
/** `@node-rs/crc32`'s module as the check uses it. */
export interface NodeRsCrc32Module {
  crc32c(bytes: Uint8Array, initial?: number): number;
}

/**
 * `RDDP_CRC32C`'s values, fastest first: the package each names, how to get it where it is missing, and
 * `check(module)`, whether that package's module (loaded by the caller) computes `CRC32C_CHECK_VALUE`.
 */
export const CRC32C_BACKENDS = {
  isal: {
    package: '@rddp/crc32c-isal',
    get: 'apt-get install libisal-dev, then pnpm install (builds @rddp/crc32c-isal with node-gyp)',
    check: (m: IsalCrc32cModule): boolean => m.calculate(CHECK_INPUT, 0, CHECK_INPUT.length, 0) === CRC32C_CHECK_VALUE,
  },
  sse4_crc32: {
    package: 'sse4_crc32',
    get: 'pnpm install with node-gyp and a C++ compiler (apt-get install build-essential python3) on an SSE4.2 CPU',
    // Without SSE4.2 the package computes with a table: not a backend.
    check: (m: Sse4Crc32Module): boolean => m.hardware_support && m.calculate(CHECK_INPUT) === CRC32C_CHECK_VALUE,
  },
  'node-rs': {
    package: '@node-rs/crc32',
    get: 'pnpm install',
    check: (m: NodeRsCrc32Module): boolean => m.crc32c(CHECK_INPUT) === CRC32C_CHECK_VALUE,
  },
} as const;

/** A name `RDDP_CRC32C` takes. */
export type Crc32cBackendName = keyof typeof CRC32C_BACKENDS;

/** `RDDP_CRC32C`'s names, fastest first. */
export const CRC32C_BACKEND_NAMES = Object.keys(CRC32C_BACKENDS) as readonly Crc32cBackendName[];

/** Whether `name` is one of `RDDP_CRC32C`'s names. */
export function isCrc32cBackendName(name: string): name is Crc32cBackendName {
  return Object.hasOwn(CRC32C_BACKENDS, name);
}

/**
 * A transport's loader per backend: the backend, its module passing its entry's `check`, or undefined
 * (or a throw) where it does not load here.
 */
export type Crc32cLoaders<T> = { readonly [K in Crc32cBackendName]: () => T | undefined };

/** The backend `resolveCrc32cBackend` chose. */
export interface Crc32cChoice<T> {
  readonly name: Crc32cBackendName;
  /** The package it is (`CRC32C_BACKENDS[name].package`). */
  readonly package: string;
  /** What its loader returned. */
  readonly backend: T;
}

/** Base of the pin's errors: catches both. */
export abstract class Crc32cBackendError extends LlpError {}

/** `RDDP_CRC32C` names no backend. */
export class Crc32cBackendUnknownError extends codedError(Crc32cBackendError, 'ERR_LLP_CRC32C_BACKEND_UNKNOWN') {}

/** The backend `RDDP_CRC32C` pins does not load here (or, unpinned, none does): never the next one in its place. */
export class Crc32cBackendMissingError extends codedError(Crc32cBackendError, 'ERR_LLP_CRC32C_BACKEND_MISSING') {}

/**
 * The backend to use: with `pin` (the value of `RDDP_CRC32C`) undefined, the fastest whose loader gives
 * one; else the pinned one. Throws `Crc32cBackendUnknownError` for a name that is no backend and
 * `Crc32cBackendMissingError` where the backend wanted does not load (the loader's throw is the `cause`).
 */
export function resolveCrc32cBackend<T>(pin: string | undefined, loaders: Crc32cLoaders<T>): Crc32cChoice<T> {
  if (pin !== undefined && !isCrc32cBackendName(pin))
    throw new Crc32cBackendUnknownError(
      `${CRC32C_PIN_ENV}=${pin} names no CRC32c backend (one of: ${CRC32C_BACKEND_NAMES.join(', ')})`,
    );
  let cause: unknown;
  for (const name of pin === undefined ? CRC32C_BACKEND_NAMES : [pin]) {
    let backend: T | undefined;
    try {
      backend = loaders[name]();
    } catch (e) {
      cause = e;
    }
    if (backend !== undefined) return { name, package: CRC32C_BACKENDS[name].package, backend };
  }
  if (pin !== undefined) {
    const want = CRC32C_BACKENDS[pin];
    throw new Crc32cBackendMissingError(
      `${CRC32C_PIN_ENV}=${pin} pins ${want.package}, which does not load here: ${want.get}; or unset ${CRC32C_PIN_ENV}`,
      { cause },
    );
  }
  throw new Crc32cBackendMissingError(
    `no CRC32c backend loads here (${CRC32C_BACKEND_NAMES.map((n) => CRC32C_BACKENDS[n].package).join(', ')}): ${CRC32C_BACKENDS['node-rs'].get}`,
    { cause },
  );
}
