import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { forEachKubeVersion } from './control-plane.js';
import { apiError, createNamespace, deleteNamespaces, helmInstall, helmUninstall, plainPod, readBack, uniqueName, type Release } from './cluster.js';

/** The chart installed, its injector not running (no kubelet runs its Deployment). */
forEachKubeVersion('helm install of the chart as shipped, before the injector runs', (plane) => {
  let release: Release | undefined;
  const enabled = uniqueName('enabled');
  const plain = uniqueName('plain');
  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('smoke'), namespace: uniqueName('smoke-system') });
    await Promise.all([createNamespace(plane(), enabled, { 'envoy-injector.io/inject': 'enabled' }), createNamespace(plane(), plain)]);
  });
  after(async () => {
    if (release !== undefined) await helmUninstall(plane(), release);
    await deleteNamespaces(plane(), [enabled, plain]);
  });

  it('creates every resource of the chart', async () => {
    assert.ok(release !== undefined);
    const kinds = release.manifests.map((manifest) => manifest.kind).sort();
    for (const kind of ['ClusterRole', 'ClusterRoleBinding', 'ConfigMap', 'Deployment', 'MutatingWebhookConfiguration', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']) {
      assert.ok(kinds.includes(kind), `the chart installs a ${kind} (installed: ${kinds.join(', ')})`);
    }
    for (const manifest of release.manifests) {
      const namespaced = manifest.metadata.namespace === undefined && !['ClusterRole', 'ClusterRoleBinding', 'MutatingWebhookConfiguration'].includes(manifest.kind);
      const stored = await readBack(plane(), namespaced ? { ...manifest, metadata: { ...manifest.metadata, namespace: release.namespace } } : manifest);
      assert.ok(stored !== undefined, `${manifest.kind} ${manifest.metadata.name} is stored in the API server`);
      assert.equal(stored.metadata?.labels?.['app.kubernetes.io/instance'], release.name, `${manifest.kind} ${manifest.metadata.name} carries the release label`);
    }
  });

  it('failurePolicy Fail: a Pod of an enabled namespace is refused with an error naming the webhook', async () => {
    const core = plane().kubeConfig.makeApiClient(CoreV1Api);
    const refused = await core.createNamespacedPod({ namespace: enabled, body: plainPod('refused') }).then(
      () => undefined,
      (error: unknown) => apiError(error),
    );
    assert.ok(refused !== undefined, 'the Pod was admitted although its webhook cannot be reached');
    assert.match(refused.message, /failed calling webhook "enabled-namespaces\.[a-z0-9.-]+\.envoy-injector\.io"/);
    const stored = await core.listNamespacedPod({ namespace: enabled });
    assert.equal(stored.items.length, 0, 'nothing stored');
  });

  it('a Pod of a plain namespace is admitted untouched', async () => {
    const core = plane().kubeConfig.makeApiClient(CoreV1Api);
    const created = await core.createNamespacedPod({ namespace: plain, body: plainPod('untouched') });
    assert.deepEqual(created.spec?.containers.map((container) => container.name), ['app']);
    assert.equal(created.spec?.initContainers, undefined);
    assert.equal(created.metadata?.annotations?.['envoy-injector.io/status'], undefined);
  });

  it('webhook.failurePolicy=Ignore: the enabled namespace\'s Pod is admitted without a sidecar', async () => {
    assert.ok(release !== undefined);
    await helmInstall(plane(), release, { webhook: { failurePolicy: 'Ignore' } }, { upgrade: true });
    const core = plane().kubeConfig.makeApiClient(CoreV1Api);
    const created = await core.createNamespacedPod({ namespace: enabled, body: plainPod('ignored') });
    assert.deepEqual(created.spec?.containers.map((container) => container.name), ['app']);
    assert.equal(created.spec?.initContainers, undefined);
  });
});
