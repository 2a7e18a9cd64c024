/** `rddp experiment`'s typed errors: one class per condition, each with a stable `code`. */
import { RddpError } from '@rddp/llp';

/** Base class of `rddp experiment`'s errors. */
export abstract class ExperimentError extends RddpError {}

/** A channel message (HELLO, READY, a measured Send, FIN) that is not what the workload carries there. */
export class ExperimentProtocolError extends ExperimentError {
  readonly code = 'ERR_EXPERIMENT_PROTOCOL';
}

/** The topology needs root, `ip netns`, `nft` and `tc` (no --no-netns mode: kernel loss is the point). */
export class TopologyUnavailableError extends ExperimentError {
  readonly code = 'ERR_EXPERIMENT_TOPOLOGY';
}

/** A helper process (responder, initiator, relay) failed or printed no report. */
export class ExperimentRunError extends ExperimentError {
  readonly code = 'ERR_EXPERIMENT_RUN';
}
