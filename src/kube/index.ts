// What serve loads only when a cluster is configured (this pulls in @kubernetes/client-node).
export { CertificateManager, DEFAULT_CERTIFICATE_SETTINGS, shortLivedCertificateSettings, type CertificateSettings } from './certificates/index.js';
export { connectToCluster, type ClusterConnection } from './api/index.js';
export { ClusterVersionCheck, KubeletVersions, startClusterWatches, watchTemplateConfigMap, type ClusterWatches } from './watches/index.js';
export { RolloutController, type RolloutControllerOptions, type RolloutRecorder, type WorkloadUpdateStep } from './rollout-controller.js';
export { WorkloadEvents, type WorkloadEventsOptions } from './workload-events.js';
export type { WatchLiveness } from './api/index.js';
