export * from './dissect.js';
export * from './format.js';
export * from './model.js';
