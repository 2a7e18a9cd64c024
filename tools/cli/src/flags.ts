/**
 * Parsers for the tools' numeric flags (commander `argParser`): a value out of range is a usage error
 * (exit 2, one line) before anything runs, never a NaN or an endless loop later.
 */
import { InvalidArgumentError, Option } from 'commander';

/** An integer in min..max; the flag keeps its text (the commands' own checks read it again). */
export function integerIn(min: number, max: number): (v: string) => string {
  return (v) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isInteger(n) || n < min || n > max)
      throw new InvalidArgumentError(`must be an integer in ${min}..${max}.`);
    return v;
  };
}

/** A number over 0 and at most max (durations, budgets). */
export function positiveUpTo(max: number): (v: string) => string {
  return (v) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n <= 0 || n > max)
      throw new InvalidArgumentError(`must be a number over 0 and at most ${max}.`);
    return v;
  };
}

/** A number in min..max (a warm-up of 0 seconds, say). */
export function numberIn(min: number, max: number): (v: string) => string {
  return (v) => {
    const n = Number(v);
    if (v.trim() === '' || !Number.isFinite(n) || n < min || n > max)
      throw new InvalidArgumentError(`must be a number in ${min}..${max}.`);
    return v;
  };
}

/** A comma-separated list of integers in min..max. */
export function integerListIn(min: number, max: number): (v: string) => string {
  const one = integerIn(min, max);
  return (v) => {
    for (const x of v.split(',')) one(x);
    return v;
  };
}

/** MPA interop deviation (docs/MPA.md): accept received ULPDUs longer than RFC 5044 §3's 64768. */
export function maxUlpduOption(): Option {
  return new Option(
    '--max-ulpdu <n>',
    'interop deviation: accept received ULPDUs up to this length (64768..65535; RFC 5044 §3 says 64768)',
  ).argParser(integerIn(64768, 65535));
}

/** MPA interop deviation (docs/MPA.md): an initiator that accepts the responder's FPDU before its own. */
export function tolerateEarlyFpduOption(): Option {
  return new Option(
    '--tolerate-early-fpdu',
    'interop deviation (initiator): accept an FPDU from the responder before ours (RFC 5044 §7.1.2 forbids it)',
  );
}

/** SCTP (RFC 8260 §2): offer user message interleaving (I-DATA); used when the peer offers it too. */
export function sctpInterleavingOption(): Option {
  return new Option(
    '--sctp-interleaving',
    'SCTP: offer I-DATA (RFC 8260 user message interleaving); used when the peer offers it too',
  );
}

/** SCTP (RFC 8260 §3): the stream scheduler. */
export function sctpSchedulerOption(): Option {
  return new Option('--sctp-scheduler <name>', 'SCTP stream scheduler (RFC 8260 §3)').choices([
    'rr',
    'fcfs',
    'priority',
  ]);
}

/** SCTP (RFC 9260 §16): RTO.Min; the default is the RFC's 1 s. */
export function sctpRtoMinOption(): Option {
  return new Option(
    '--sctp-rto-min <ms>',
    'SCTP RTO.Min in ms (default 1000, RFC 9260 §16); on a LAN a lower one repairs a lost retransmission sooner',
  ).argParser(integerIn(1, 60_000));
}
