/**
 * @rddp/ddp/testing — DDP internals that tests reach for: the header codec's hot-path helpers
 * (RFC 5041 §4) and the STag quarantine bound. Not part of the DDP API.
 */
export { gatherPrefix, get32, MAX_SAFE_TO, MAX_UNTAGGED_RSVDULP, writeTagged } from './header.js';
export { regionOffset, STAG_QUARANTINE } from './stag-table.js';
