// The injection core's door: every room below, from the ground up. Callers
// outside injection/ import this file only.
export * from './basics/index.js';
export * from './template/index.js';
export * from './decision/index.js';
export * from './traffic/index.js';
export * from './merge/index.js';
export * from './workloads.js';
export * from './admit-pod.js';
export * from './inject-manifests.js';
