// What serve loads only when a cluster is configured (this pulls in @kubernetes/client-node).
export { CertificateManager, DEFAULT_CERTIFICATE_SETTINGS, shortLivedCertificateSettings, type CertificateSettings } from './certificate-manager.js';
export { connectToCluster, type ClusterConnection } from './cluster-connection.js';
export { ClusterVersionCheck } from './cluster-version.js';
export { KubeletVersions } from './kubelet-versions.js';
export { startClusterWatches, type ClusterWatches } from './cluster-watches.js';
export { watchTemplateConfigMap } from './template-watch.js';
export { WorkloadEvents, type WorkloadEventsOptions } from './workload-events.js';
export type { WatchLiveness } from './stream-liveness.js';
