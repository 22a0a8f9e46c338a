// injection/template: a template set parsed and held to what the API server would accept.
export * from './bundled-template.js';
export * from './capture-grammar.js';
export * from './capture-template.js';
export * from './check-field-types.js';
export * from './entry-checks.js';
export * from './lifecycle-template.js';
export * from './parse-template.js';
export * from './pod-field-types.js';
export * from './validate-env.js';
export * from './validate-resources.js';
export * from './validate-template.js';
export * from './validate-volume.js';
