/**
 * `--faults <list>`: the loopback LLP's fault injection (`LoopbackFaults` of `@rddp/llp-loopback`) from
 * the command line, for `rddp perf --loopback --transport loopback`. A comma-separated list of
 * `name=value`:
 *
 *   chunk=<n>        deliver each ULPDU in chunks of 1..n octets (seeded)
 *   delay=<ms>       delay every delivery by ms milliseconds
 *   abort-after=<n>  abort the connection once n ULPDUs have been delivered (both ends see an abortive close)
 *   seed=<n>         the seed of the chunking (default 1)
 *
 * Reordering, duplicates and drops (also `LoopbackFaults`) make the LLP unordered or unreliable, which
 * DDP as RDMAP uses it does not run on (RFC 5041 §3): they are refused here and stay an API for tests.
 */
import type { LoopbackFaults } from '@rddp/llp-loopback';
import { InvalidArgumentError, Option } from 'commander';

/** The names `--faults` takes, each with its range. */
const FAULTS = {
  chunk: { min: 1, max: 65_536 },
  delay: { min: 0, max: 60_000 },
  'abort-after': { min: 0, max: Number.MAX_SAFE_INTEGER },
  seed: { min: 0, max: 2 ** 32 - 1 },
} as const;
type FaultName = keyof typeof FAULTS;

/** The faults RFC 5041 §3 rules out for DDP (the loopback LLP declares itself unordered or unreliable). */
const REFUSED = ['reorder', 'duplicate', 'drop'];

/** Parses a `--faults` list; throws commander's InvalidArgumentError (a usage error, exit 2) on a bad one. */
export function parseFaults(list: string): LoopbackFaults {
  const values: Partial<Record<FaultName, number>> = {};
  for (const item of list.split(',')) {
    const [name = '', value, ...rest] = item.trim().split('=');
    if (REFUSED.includes(name))
      throw new InvalidArgumentError(
        `'${name}' makes the loopback LLP unordered or unreliable; DDP needs a reliable, ordered LLP (RFC 5041 §3).`,
      );
    if (!Object.hasOwn(FAULTS, name))
      throw new InvalidArgumentError(`unknown fault '${name}' (one of: ${Object.keys(FAULTS).join(', ')}).`);
    const range = FAULTS[name as FaultName];
    const n = Number(value);
    if (value === undefined || rest.length > 0 || value.trim() === '' || !Number.isInteger(n))
      throw new InvalidArgumentError(`'${item.trim()}': expected ${name}=<integer>.`);
    if (n < range.min || n > range.max)
      throw new InvalidArgumentError(`${name} must be an integer in ${range.min}..${range.max} (got ${value}).`);
    values[name as FaultName] = n;
  }
  if (values.seed !== undefined && values.chunk === undefined)
    throw new InvalidArgumentError('seed applies to chunk: give chunk=<n> too.');
  return {
    ...(values.chunk !== undefined ? { chunking: { maxChunk: values.chunk, seed: values.seed ?? 1 } } : {}),
    ...(values.delay !== undefined ? { delayMs: values.delay } : {}),
    ...(values['abort-after'] !== undefined ? { abortAfterUlpdus: values['abort-after'] } : {}),
  };
}

/** The `--faults <list>` option (checked when parsed; the flag keeps its text for `toolTransport`). */
export function faultsOption(): Option {
  return new Option(
    '--faults <list>',
    'loopback LLP faults, e.g. chunk=7,delay=1,abort-after=1000,seed=3 (--transport loopback only)',
  ).argParser((v: string) => {
    parseFaults(v);
    return v;
  });
}
