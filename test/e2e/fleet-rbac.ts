import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { KubernetesObjectApi, RbacAuthorizationV1Api, type KubernetesObject } from '@kubernetes/client-node';
import { parseYamlDocuments } from '../../src/injection/index.js';
import { ROOT } from '../helpers/fixtures.js';
import type { ControlPlane } from './control-plane.js';

/** docs/fleet.md's RBAC block for `status`, applied as written (the Role moved to the release's namespace). */
export function guideRbac(injectorNamespace: string): KubernetesObject[] {
  const guide = readFileSync(join(ROOT, 'docs/fleet.md'), 'utf8');
  const section = guide.slice(guide.indexOf('## The permissions each form needs'));
  const yaml = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
  assert.ok(yaml !== undefined, 'docs/fleet.md has the RBAC block');
  return (parseYamlDocuments(yaml) as KubernetesObject[]).map((object) =>
    object.kind === 'Role' ? { ...object, metadata: { ...object.metadata, namespace: injectorNamespace } } : object,
  );
}

/**
 * A ServiceAccount SA of NAMESPACE holding the guide's CLUSTER_ROLES (and its
 * Role on the templates), each object named with SUFFIX; its kubeconfig.
 * `remove` deletes the cluster-wide objects again.
 */
export async function guideUser(plane: ControlPlane, injectorNamespace: string, namespace: string, account: string, clusterRoles: readonly string[], suffix: string): Promise<{ kubeconfig: string; remove(): Promise<void> }> {
  const objects = KubernetesObjectApi.makeApiClient(plane.kubeConfig);
  const rbac = plane.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
  const rules = guideRbac(injectorNamespace).filter((object) => object.kind === 'Role' || clusterRoles.includes(object.metadata?.name ?? ''));
  for (const object of rules) await objects.create({ ...object, metadata: { ...object.metadata, name: `${object.metadata?.name ?? ''}-${suffix}` } });
  const { CoreV1Api } = await import('@kubernetes/client-node');
  await plane.kubeConfig.makeApiClient(CoreV1Api).createNamespacedServiceAccount({ namespace, body: { metadata: { name: account } } });
  const subjects = [{ kind: 'ServiceAccount', name: account, namespace }];
  for (const role of clusterRoles) {
    await rbac.createClusterRoleBinding({ body: { metadata: { name: `${role}-${suffix}` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: `${role}-${suffix}` }, subjects } });
  }
  await rbac.createNamespacedRoleBinding({ namespace: injectorNamespace, body: { metadata: { name: `status-${suffix}` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: `envoy-injector-status-${suffix}` }, subjects } });
  return {
    kubeconfig: await plane.serviceAccountKubeconfig(namespace, account),
    remove: async () => {
      for (const role of clusterRoles) {
        await rbac.deleteClusterRoleBinding({ name: `${role}-${suffix}` }).catch(() => undefined);
        await rbac.deleteClusterRole({ name: `${role}-${suffix}` }).catch(() => undefined);
      }
    },
  };
}
