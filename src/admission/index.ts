export * from './review-schema.js';
export * from './responses.js';
export * from './review-admission.js';
export * from './patch-memo.js';
