/**
 * The ways `rddp experiment` maps its flows onto connections and streams (workload.ts explains each);
 * a module of its own so the command line can check `--mappings` without loading the workload.
 */
export const MAPPINGS = ['sctp-streams', 'sctp-assocs', 'tcp-conns', 'tcp-shared', 'sctp-idata'] as const;
export type Mapping = (typeof MAPPINGS)[number];
/** What a run compares when not told otherwise: the four mappings of the head-of-line question. */
export const DEFAULT_MAPPINGS: readonly Mapping[] = ['sctp-streams', 'sctp-assocs', 'tcp-conns', 'tcp-shared'];

export const MAPPING_TITLES: Record<Mapping, string> = {
  'sctp-streams': 'N SCTP streams, one association',
  'sctp-assocs': 'N SCTP associations',
  'tcp-conns': 'N MPA/TCP connections',
  'tcp-shared': 'one MPA/TCP connection shared',
  'sctp-idata': 'N SCTP streams, one association, I-DATA',
};
