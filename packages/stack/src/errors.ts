/** One error class per condition, each with a stable `code`. */

/** Base class of the errors `@rddp/stack` throws itself. */
export abstract class StackError extends Error {
  abstract readonly code: string;
  constructor(message: string) {
    super(message);
    this.name = new.target.name;
  }
}

/** A layer was asked for on an LLP stream index the connection does not have. */
export class NoSuchLlpStreamError extends StackError {
  readonly code = 'ERR_RDDP_STACK_NO_LLP_STREAM';
  constructor(readonly index: number) {
    super(`the connection has no LLP stream ${index}`);
  }
}
