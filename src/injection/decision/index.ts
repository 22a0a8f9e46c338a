// injection/decision: who gets injected, and with which overrides (design.md §4).
export * from './annotations-size.js';
export * from './decide-injection.js';
export * from './label-selector.js';
export * from './namespace-metadata.js';
export * from './other-meshes.js';
export * from './overrides.js';
export * from './pod-os.js';
export * from './status-annotation.js';
