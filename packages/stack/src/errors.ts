/** One error class per condition, each with a stable `code`. */
import { codedError, RddpError } from '@rddp/llp';

/** Base class of the errors `@rddp/stack` throws itself; an `RddpError` like every rddp error. */
export abstract class StackError extends RddpError {}

/** A layer was asked for on an LLP stream index the connection does not have. */
export class NoSuchLlpStreamError extends codedError(StackError, 'ERR_RDDP_STACK_NO_LLP_STREAM') {
  constructor(readonly index: number) {
    super(`the connection has no LLP stream ${index}`);
  }
}
