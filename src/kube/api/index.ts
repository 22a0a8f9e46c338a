// kube/api: talking to the API server (requests, lists, watches and their liveness, backoff).
export * from './backoff.js';
export * from './cluster-connection.js';
export * from './cluster-request.js';
export * from './kube-errors.js';
export * from './kube-json.js';
export * from './lease-election.js';
export * from './list-items.js';
export * from './paged-list.js';
export * from './pod-delete.js';
export * from './resilient-informer.js';
export * from './stream-liveness.js';
export * from './tracked-watch.js';
