// kube/watches: the live state the injector and the node agent follow.
export * from './cluster-version.js';
export * from './cluster-watches.js';
export * from './kubelet-versions.js';
export * from './namespace-labels.js';
export * from './node-pods.js';
export * from './rollout-watches.js';
export * from './template-watch.js';
