/**
 * The cluster the bench's cluster-mode figures follow: a real kube-apiserver
 * (+ etcd) from the real-API-server harness when its binaries are there, else
 * the tests' fake API server. Either holds the injector's namespace and its
 * template ConfigMap, so that the injector opens both watches and gets ready.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import yaml from 'js-yaml';
import { startControlPlane } from '../test/e2e/control-plane.js';
import { missingAssets } from '../test/e2e/kube-binaries.js';
import { FakeApiServer } from '../test/helpers/fake-api-server.js';
import { ROOT } from './processes.js';

export const CLUSTER_NAMESPACE = 'envoy-injector';
const CONFIGMAP = 'envoy-initializer';
/**
 * Namespaces of the workloads (issue 28): each labeled enabled with a template,
 * with the proxy-* defaults and a kubectl last-applied copy, as `kubectl apply`
 * leaves them: what the Namespace watch caches (only labels and our annotations).
 */
const WORKLOAD_NAMESPACES = 200;

function workloadNamespace(index: number): { metadata: { name: string; labels: Record<string, string>; annotations: Record<string, string> } } {
  const name = `team-${String(index).padStart(3, '0')}`;
  const labels = { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'config', team: name };
  const annotations: Record<string, string> = { 'envoy-injector.io/proxy-cpu': '200m', 'envoy-injector.io/proxy-memory': '128Mi', 'envoy-injector.io/proxy-memory-limit': '512Mi' };
  annotations['kubectl.kubernetes.io/last-applied-configuration'] = JSON.stringify({ apiVersion: 'v1', kind: 'Namespace', metadata: { name, labels, annotations: { ...annotations } } }) + ' '.repeat(1_500);
  return { metadata: { name, labels, annotations } };
}

export interface BenchCluster {
  /** What it is, for the output: "real kube-apiserver 1.34" or "fake API server (why)". */
  readonly kind: string;
  readonly kubeconfigPath: string;
  stop(): Promise<void>;
}

/** The seed's templates (examples/envoy-initializer.yaml), the bundled default. */
function templateData(): Record<string, string> {
  const configMap = yaml.load(readFileSync(join(ROOT, 'examples', 'envoy-initializer.yaml'), 'utf8')) as { data: Record<string, string> };
  return configMap.data;
}

export async function startBenchCluster(): Promise<BenchCluster> {
  const missing = missingAssets();
  if (missing === undefined) {
    const plane = await startControlPlane('1.34', { controllers: false });
    try {
      const { CoreV1Api } = await import('@kubernetes/client-node');
      const core = plane.kubeConfig.makeApiClient(CoreV1Api);
      await core.createNamespace({ body: { metadata: { name: CLUSTER_NAMESPACE } } });
      await core.createNamespacedConfigMap({ namespace: CLUSTER_NAMESPACE, body: { metadata: { name: CONFIGMAP }, data: templateData() } });
      for (let index = 0; index < WORKLOAD_NAMESPACES; index += 1) await core.createNamespace({ body: workloadNamespace(index) });
    } catch (error) {
      await plane.stop();
      throw error;
    }
    return { kind: `real kube-apiserver ${plane.version}`, kubeconfigPath: plane.kubeconfigPath, stop: () => plane.stop() };
  }
  const fake = await FakeApiServer.start();
  fake.apply('namespaces', { metadata: { name: CLUSTER_NAMESPACE } });
  // The seed review's namespace, which a real API server makes itself.
  fake.apply('namespaces', { metadata: { name: 'default' } });
  fake.apply('configmaps', { metadata: { name: CONFIGMAP, namespace: CLUSTER_NAMESPACE }, data: templateData() });
  for (let index = 0; index < WORKLOAD_NAMESPACES; index += 1) fake.apply('namespaces', workloadNamespace(index));
  return { kind: `fake API server (${missing})`, kubeconfigPath: fake.writeKubeconfig(), stop: () => fake.close() };
}
