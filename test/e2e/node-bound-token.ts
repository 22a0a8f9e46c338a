import assert from 'node:assert/strict';
import { writeFile, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { JsonObject } from '../../src/injection/index.js';
import type { ControlPlane } from './control-plane.js';
import { kubeCall } from './policy-parity.js';

/**
 * A ServiceAccount's token as the kubelet gets it for a Pod it runs: from the
 * TokenRequest API bound to that Pod (`boundObjectRef`), the Pod bound to a
 * Node. From Kubernetes 1.30 (ServiceAccountTokenPodNodeInfo) such a token
 * carries the Node's name, and requests made with it have the user extra
 * `authentication.kubernetes.io/node-name`; on 1.28 the token names the Pod
 * alone. No kubelet here: the Node and the Pod are objects only.
 */

export interface NodeBoundToken {
  readonly token: string;
  /** A kubeconfig file with that token. */
  readonly kubeconfigPath: string;
  /** The Pod the token is bound to. */
  readonly pod: { readonly namespace: string; readonly name: string; readonly uid: string };
}

/** Creates Node NODE if absent (an object only: no kubelet). */
export async function ensureNode(plane: ControlPlane, node: string): Promise<void> {
  const created = await kubeCall(plane, 'POST', '/api/v1/nodes', { apiVersion: 'v1', kind: 'Node', metadata: { name: node } });
  assert.ok(created.status === 201 || created.status === 409, JSON.stringify(created.body));
}

/** Deletes Node NODE (other files read the cluster's Nodes: the kubelets' versions). */
export async function deleteNode(plane: ControlPlane, node: string): Promise<void> {
  const deleted = await kubeCall(plane, 'DELETE', `/api/v1/nodes/${node}`);
  assert.ok(deleted.status === 200 || deleted.status === 404, JSON.stringify(deleted.body));
}

/**
 * A token of ServiceAccount NAMESPACE/ACCOUNT bound to a new Pod POD of
 * that ServiceAccount on NODE (the Node made if absent), and a kubeconfig.
 * LABELS go on the Pod (the chart's marker keeps the injector's webhooks away).
 */
export async function nodeBoundToken(plane: ControlPlane, options: { namespace: string; account: string; node: string; pod: string; labels?: Record<string, string> }): Promise<NodeBoundToken> {
  await ensureNode(plane, options.node);
  const created = await kubeCall(plane, 'POST', `/api/v1/namespaces/${options.namespace}/pods`, {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: options.pod, labels: options.labels ?? {} },
    spec: { nodeName: options.node, serviceAccountName: options.account, automountServiceAccountToken: false, containers: [{ name: 'agent', image: 'registry.example/agent:1' }] },
  });
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const uid = String((created.body['metadata'] as JsonObject)['uid']);
  const request = await kubeCall(plane, 'POST', `/api/v1/namespaces/${options.namespace}/serviceaccounts/${options.account}/token`, {
    apiVersion: 'authentication.k8s.io/v1',
    kind: 'TokenRequest',
    spec: { audiences: [], expirationSeconds: 3600, boundObjectRef: { apiVersion: 'v1', kind: 'Pod', name: options.pod, uid } },
  });
  assert.equal(request.status, 201, JSON.stringify(request.body));
  const token = String((request.body['status'] as JsonObject)['token']);
  const dir = await mkdtemp(join(tmpdir(), 'ei-bound-token-'));
  const kubeconfigPath = join(dir, 'kubeconfig');
  await writeFile(
    kubeconfigPath,
    JSON.stringify({
      apiVersion: 'v1',
      kind: 'Config',
      clusters: [{ name: 'test', cluster: { server: plane.server, 'certificate-authority-data': Buffer.from(plane.ca).toString('base64') } }],
      users: [{ name: options.account, user: { token } }],
      contexts: [{ name: 'test', context: { cluster: 'test', user: options.account, namespace: options.namespace } }],
      'current-context': 'test',
    }),
    { mode: 0o600 },
  );
  return { token, kubeconfigPath, pod: { namespace: options.namespace, name: options.pod, uid } };
}

/** What the API server makes of TOKEN: its user's extra (SelfSubjectReview, authentication.k8s.io/v1 from 1.28). */
export async function userExtra(plane: ControlPlane, token: string): Promise<Record<string, string[]>> {
  const review = await kubeCall({ ...plane, adminToken: token }, 'POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
  assert.equal(review.status, 201, JSON.stringify(review.body));
  const userInfo = (review.body['status'] as JsonObject)['userInfo'] as JsonObject;
  return (userInfo['extra'] ?? {}) as Record<string, string[]>;
}
