// injection/traffic: how an injected Pod's traffic is captured (design.md §11).
export * from './capture.js';
export * from './capture-check.js';
export * from './envoy-listener.js';
export * from './interception.js';
export * from './proxy-config.js';
export * from './proxy-ids.js';
export * from './proxy-protocol.js';
export * from './run-as.js';
export * from './tcp-probes.js';
