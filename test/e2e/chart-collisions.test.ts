import assert from 'node:assert/strict';
import { after, it } from 'node:test';
import { AppsV1Api, RbacAuthorizationV1Api } from '@kubernetes/client-node';
import { forEachKubeVersion } from './control-plane.js';
import { helmInstall, helmUninstall, uniqueName, type Release } from './cluster.js';

/** Chart installs that must not step on each other, and an upgrade that must not scale the injector down. */
forEachKubeVersion('chart releases side by side, and upgrades', (plane) => {
  const releases: Release[] = [];
  const install = async (...args: Parameters<typeof helmInstall> extends [unknown, ...infer Rest] ? Rest : never): Promise<Release> => {
    const release = await helmInstall(plane(), ...args);
    releases.push(release);
    return release;
  };
  after(async () => {
    for (const release of releases.splice(0)) await helmUninstall(plane(), release).catch(() => undefined);
  });

  it('one release name in two namespaces: both install, each with its own cluster-scoped objects', async () => {
    const name = uniqueName('twin');
    const [a, b] = [await install({ name, namespace: uniqueName('twin-a') }), await install({ name, namespace: uniqueName('twin-b') })];
    const rbac = plane().kubeConfig.makeApiClient(RbacAuthorizationV1Api);
    for (const release of [a, b]) {
      const role = release.manifests.find((manifest) => manifest.kind === 'ClusterRole');
      assert.ok(role !== undefined);
      const stored = await rbac.readClusterRole({ name: role.metadata.name });
      assert.equal(stored.metadata?.annotations?.['meta.helm.sh/release-namespace'], release.namespace, `ClusterRole ${role.metadata.name} is ${release.namespace}'s`);
    }
  });

  it('a second release in one namespace: refused, naming the shared ConfigMap and the value to change', async () => {
    const namespace = uniqueName('shared');
    const first = await install({ name: uniqueName('first'), namespace });
    const second = uniqueName('second');
    await assert.rejects(install({ name: second, namespace }), (error: Error) => {
      assert.match(error.message, new RegExp(`ConfigMap ${namespace}/envoy-initializer already exists and belongs to release ${first.name}: .*set templates\\.configMapName to another name for release ${second}`));
      return true;
    });
    await install({ name: second, namespace }, { templates: { configMapName: 'second-templates' } });
  });

  it('turning the HPA on in an upgrade keeps the running replicas', async () => {
    const release = await install({ name: uniqueName('scale'), namespace: uniqueName('scale') }, { replicaCount: 3 });
    const deployment = release.manifests.find((manifest) => manifest.kind === 'Deployment');
    assert.ok(deployment !== undefined);
    const apps = plane().kubeConfig.makeApiClient(AppsV1Api);
    const replicas = async () => (await apps.readNamespacedDeployment({ name: deployment.metadata.name, namespace: release.namespace })).spec?.replicas;
    assert.equal(await replicas(), 3);
    await helmInstall(plane(), release, { autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 5 } }, { upgrade: true });
    assert.equal(await replicas(), 3, 'not reset to 1 (nor to minReplicas) by the upgrade');
  });
});
