// node/cni: the node agent's pure decisions in CNI mode (design.md §11).
export * from './capture-probe-target.js';
export * from './capture-status.js';
export * from './chain-config.js';
export * from './cni-request.js';
export * from './repair.js';
