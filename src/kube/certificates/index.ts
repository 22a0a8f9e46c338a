// kube/certificates: the serving certificate, its Secret, renewal and caBundle.
export * from './ca-bundle.js';
export * from './ca-bundle-patcher.js';
export * from './certificate-manager.js';
export * from './certificate-secret.js';
export * from './renewal-schedule.js';
