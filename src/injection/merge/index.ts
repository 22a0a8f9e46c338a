// injection/merge: the template merged into the Pod, as JSON Patch (design.md §5, §13, §14).
export * from './apply-patch.js';
export * from './init-order.js';
export * from './inject-pod.js';
export * from './pod-resources.js';
export * from './proxy-lifecycle.js';
export * from './token-mount.js';
