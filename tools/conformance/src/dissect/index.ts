export * from './dissect.js';
export * from './format.js';
export { DEFAULT_MAX_STATE_OCTETS, STATE_COST } from './meter.js';
export * from './model.js';
export { DEFAULT_MAX_REPORT_ENTRIES, MAX_DETAIL_OCTETS, MAX_TERMINATES_LISTED } from './recorder.js';
export { MAX_TCP_OUT_OF_ORDER, MAX_TCP_OUT_OF_ORDER_SEGMENTS } from './tcp.js';
