/**
 * perf's defaults and flag ranges, in a module that imports nothing, so `rddp perf --help` registers the
 * command without loading the stack (issue 37). The modules that use them re-export them.
 */

/** The most Reads and atomics a client may keep outstanding (`--outs`): the server's IRD, as siw's 128. */
export const PERF_MAX_OUTS = 128;
/**
 * Reads and atomics a client keeps outstanding by default: the device's most, as perftest takes the
 * device's `max_qp_rd_atom` when `-o` is not given (Linux siw: 128). docs/PERFORMANCE.md,
 * "Moderation and outstanding Reads", says what the window does to read_bw.
 */
export const DEFAULT_OUTS = PERF_MAX_OUTS;
/** perftest's default CQ moderation: one signaled send work request in 100 (at most one per tx-depth). */
export const DEFAULT_CQ_MOD = 100;
/** perftest's default tx-depth of the bandwidth tests (`DEF_TX_BW`). */
export const DEFAULT_TX_DEPTH = 128;
/**
 * Messages larger than this are signaled one by one unless `--cq-mod` is given, as perftest does
 * (`MSG_SIZE_CQ_MOD_LIMIT`): with moderation the window drains to `tx-depth - cq-mod` before the
 * signaled completion lets the client post again, which a large Read's round trip turns into
 * stop-and-go (docs/PERFORMANCE.md).
 */
export const CQ_MOD_SIZE_LIMIT = 8192;

export const PERF_DEFAULT_MAX_SIZE = 8 << 20;
/** Room for any one-stream run (send_bw -a: 8 MiB + 32 receive buffers of 8 MiB = 264 MiB). */
export const PERF_DEFAULT_MAX_MEMORY = 512 << 20;
export const PERF_MAX_ITERS = 1e9;
export const PERF_MAX_DURATION_S = 3600;
export const PERF_MAX_TX_DEPTH = 4096;

/** `-q` range: queue pairs (connections) one client opens, one non-persistent server waits for. */
export const PERF_MAX_QPS = 1024;
/** `--workers` range (`auto`: the machine's cores). */
export const PERF_MAX_WORKERS = 256;
/** perf's `--warm-up` range (unmeasured round trips or operations per size). */
export const PERF_MAX_WARM_UP = 1_000_000;
/** perftest's -s range here: 1 octet to 1 GiB. */
export const PERF_MAX_MESSAGE = 1 << 30;
/** Where a server listens unless --bind_source_ip says otherwise: every IPv4 address. */
export const PERF_DEFAULT_BIND = '0.0.0.0';

/** The `--transport` names (transports.ts's plugin table checks it has each). */
export const TRANSPORT_NAMES = ['tcp', 'sctp', 'loopback'] as const;
