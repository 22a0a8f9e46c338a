import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { forEachKubeVersion } from './control-plane.js';
import { helmInstall, helmUninstall, readBack, uniqueName, type Release } from './cluster.js';

forEachKubeVersion('helm install of the chart as shipped', (plane) => {
  let release: Release;
  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('smoke'), namespace: uniqueName('smoke-system') });
  });
  after(async () => {
    if (release !== undefined) await helmUninstall(plane(), release);
  });

  it('creates every resource of the chart', async () => {
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
});
