import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, plainPod, uniqueName, type Release } from './cluster.js';
import { forbiddenLines, startChartInjector, type ChartInjector } from './injector-process.js';

function placement(pod: V1Pod): 'native' | 'classic' | 'none' {
  if (pod.spec?.initContainers?.some((container) => container.name === 'envoy' && container.restartPolicy === 'Always')) return 'native';
  return pod.spec?.containers.some((container) => container.name === 'envoy') ? 'classic' : 'none';
}

/**
 * nativeSidecar: auto on a 1.34 API server whose nodes include an old kubelet:
 * the chart's ServiceAccount reads the Nodes (real RBAC), and a Pod gets a
 * classic sidecar while a 1.28 kubelet is registered. No kubelet runs here:
 * the Node objects are made through the API, as a kubelet would register.
 */
forEachKubeVersion('nativeSidecar auto and the kubelets\' versions', (plane, version) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  const enabled = uniqueName('kubelets');
  const nodeName = uniqueName('old-node');
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  const dryRunPod = async () => placement(await core().createNamespacedPod({ namespace: enabled, body: plainPod(uniqueName('probe')), dryRun: 'All' }));

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('nodes'), namespace: uniqueName('nodes-system') });
    await createNamespace(plane(), enabled, { 'envoy-injector.io/inject': 'enabled' });
    const node = await core().createNode({ body: { metadata: { name: nodeName } } });
    await core().replaceNodeStatus({ name: nodeName, body: { ...node, status: { nodeInfo: { kubeletVersion: 'v1.28.7', kubeProxyVersion: '', machineID: '', systemUUID: '', bootID: '', kernelVersion: '', osImage: '', containerRuntimeVersion: '', operatingSystem: 'linux', architecture: 'amd64' } } } });
    injector = await startChartInjector(plane(), release);
  });
  after(async () => {
    await injector?.stop().catch(() => undefined);
    await core().deleteNode({ name: nodeName }).catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), [enabled]);
  });

  it(`a 1.28 kubelet registered: classic sidecars on ${version}; native once it is gone (1.29+ API servers only)`, async () => {
    await eventually('a Pod injected', async () => ((await dryRunPod()) === 'none' ? undefined : true), 30_000, 200);
    assert.equal(await dryRunPod(), 'classic');
    await core().deleteNode({ name: nodeName });
    const expected = version === '1.28' ? 'classic' : 'native';
    await eventually(`${expected} sidecars without the old node`, async () => ((await dryRunPod()) === expected ? true : undefined), 20_000, 200);
    assert.ok(injector !== undefined);
    assert.deepEqual(forbiddenLines(injector), [], 'the chart grants what the injector reads');
  });
});
