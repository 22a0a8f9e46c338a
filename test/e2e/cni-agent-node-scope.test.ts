import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import type { JsonObject } from '../../src/injection/index.js';
import { deletePodByUid } from '../../src/kube/api/pod-delete.js';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, uniqueName, type Release } from './cluster.js';
import { deleteNode, ensureNode, nodeBoundToken, userExtra, type NodeBoundToken } from './node-bound-token.js';
import { kubeCall } from './policy-parity.js';

/**
 * What the CNI agent's credentials may change (docs/capture.md, "What the
 * agent may do"; docs/design.md §11, CNI mode), against a real API server:
 * the chart installed with proxy.capture.mode cni, the agent's
 * ServiceAccount with a token bound to its Pod on node A, as the kubelet
 * gets it. Where the API server serves ValidatingAdmissionPolicy v1 (1.34,
 * 1.36) the chart's policy admits its Pod deletions only on node A and its
 * Events only as node A's agent, and a token bound to no node may do
 * neither; on 1.28 the chart renders no policy and the agent's ClusterRole
 * is all there is: any Pod of the cluster, which this test states as it is.
 * And the delete by uid: a new Pod of the same name is never the one deleted.
 */

const NODE_A = 'ei-scope-node-a';
const NODE_B = 'ei-scope-node-b';
const NODE_NAME_EXTRA = 'authentication.kubernetes.io/node-name';

forEachKubeVersion('the CNI agent may change only its own node\'s Pods and Events', (plane, version) => {
  const namespace = uniqueName('cni-scope');
  const scoped = version !== '1.28';
  let release: Release | undefined;
  let bound: NodeBoundToken | undefined;
  let unboundToken = '';

  before(async () => {
    await createNamespace(plane(), namespace, {});
    release = await helmInstall(plane(), { name: uniqueName('cni'), namespace: uniqueName('cni-system') }, { proxy: { capture: { mode: 'cni' } } });
    const account = release.manifests.find((manifest) => manifest.kind === 'ServiceAccount' && manifest.metadata.name.endsWith('-cni-agent'));
    assert.ok(account !== undefined, 'the chart made no ServiceAccount for the agent');
    bound = await nodeBoundToken(plane(), { namespace: release.namespace, account: account.metadata.name, node: NODE_A, pod: 'cni-agent-a', labels: { 'envoy-injector.io/injector': account.metadata.name } });
    unboundToken = await plane().serviceAccountToken(release.namespace, account.metadata.name);
    await ensureNode(plane(), NODE_B);
  });
  after(async () => {
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), [namespace, ...(release === undefined ? [] : [release.namespace])]);
    for (const node of [NODE_A, NODE_B]) await deleteNode(plane(), node).catch(() => undefined);
  });

  const createPod = async (name: string, node: string): Promise<string> => {
    const created = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${namespace}/pods`, { apiVersion: 'v1', kind: 'Pod', metadata: { name, labels: { 'envoy-injector.io/injector': 'test' } }, spec: { nodeName: node, containers: [{ name: 'app', image: 'registry.example/app:1' }] } });
    assert.equal(created.status, 201, JSON.stringify(created.body));
    return String((created.body['metadata'] as JsonObject)['uid']);
  };
  const deleteAs = (token: string, name: string) => kubeCall({ ...plane(), adminToken: token }, 'DELETE', `/api/v1/namespaces/${namespace}/pods/${name}`);
  const eventAs = (token: string, instanceNode: string, pod: string) =>
    kubeCall({ ...plane(), adminToken: token }, 'POST', `/apis/events.k8s.io/v1/namespaces/${namespace}/events`, {
      apiVersion: 'events.k8s.io/v1',
      kind: 'Event',
      metadata: { name: `${pod}.${Date.now().toString(16)}${Math.random().toString(16).slice(2, 6)}`, namespace },
      eventTime: new Date().toISOString().replace(/\.\d+Z$/, '.000000Z'),
      type: 'Warning',
      reason: 'CaptureRepaired',
      action: 'Delete',
      note: 'test',
      reportingController: 'envoy-injector.io/cni-agent',
      reportingInstance: `envoy-injector-cni-agent-${instanceNode}`,
      regarding: { apiVersion: 'v1', kind: 'Pod', namespace, name: pod },
    });

  /** The API server applies a new policy once its informer has it (a moment after the install): a refused Event of node B says so. */
  const untilPolicyInForce = async (): Promise<void> => {
    assert.ok(bound !== undefined);
    const token = bound.token;
    await eventually('the node policy in force', async () => ((await eventAs(token, NODE_B, 'probe')).status === 403 ? true : undefined), 20_000, 200);
  };

  it(`the chart renders the node policy where ValidatingAdmissionPolicy v1 is served (${version})`, async () => {
    assert.ok(release !== undefined);
    const kinds = release.manifests.filter((manifest) => manifest.kind.startsWith('ValidatingAdmissionPolicy')).map((manifest) => manifest.kind).sort();
    assert.deepEqual(kinds, scoped ? ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'] : []);
    if (scoped) await untilPolicyInForce();
  });

  it(`a token bound to the agent's Pod names its node from 1.30 on (${version})`, async () => {
    assert.ok(bound !== undefined);
    const extra = await userExtra(plane(), bound.token);
    assert.deepEqual(extra[NODE_NAME_EXTRA], scoped ? [NODE_A] : undefined, JSON.stringify(extra));
    assert.deepEqual(extra['authentication.kubernetes.io/pod-name'], [bound.pod.name]);
  });

  it(`deletes: its own node's Pods only (1.28: any Pod, as its ClusterRole says) (${version})`, async () => {
    assert.ok(bound !== undefined);
    await createPod('on-a', NODE_A);
    await createPod('on-b', NODE_B);
    const other = await deleteAs(bound.token, 'on-b');
    if (scoped) {
      assert.equal(other.status, 403, JSON.stringify(other.body));
      assert.match(String(other.body['message']), new RegExp(`the CNI agent of node ${NODE_A} may delete only Pods of its node; Pod ${namespace}/on-b is on node ${NODE_B}`));
      assert.equal((await kubeCall(plane(), 'GET', `/api/v1/namespaces/${namespace}/pods/on-b`)).status, 200);
    } else {
      assert.equal(other.status, 200, 'on 1.28 nothing narrows the ClusterRole: the agent deletes a Pod of another node');
    }
    const own = await deleteAs(bound.token, 'on-a');
    assert.equal(own.status, 200, JSON.stringify(own.body));
  });

  it(`Events: only as its own node's agent (${version})`, async () => {
    assert.ok(bound !== undefined);
    const own = await eventAs(bound.token, NODE_A, 'on-a');
    assert.equal(own.status, 201, JSON.stringify(own.body));
    const other = await eventAs(bound.token, NODE_B, 'on-b');
    if (scoped) {
      assert.equal(other.status, 403, JSON.stringify(other.body));
      assert.match(String(other.body['message']), /may create Events only as reportingController envoy-injector\.io\/cni-agent, reportingInstance envoy-injector-cni-agent-ei-scope-node-a/);
    } else {
      assert.equal(other.status, 201, JSON.stringify(other.body));
    }
  });

  it(`a token bound to no node may neither delete nor post Events where the policy is (${version})`, { skip: !scoped && 'no policy on 1.28' }, async () => {
    await createPod('on-a-2', NODE_A);
    const refused = await deleteAs(unboundToken, 'on-a-2');
    assert.equal(refused.status, 403, JSON.stringify(refused.body));
    assert.match(String(refused.body['message']), /the CNI agent's token names no node/);
    assert.equal((await eventAs(unboundToken, NODE_A, 'on-a-2')).status, 403);
  });

  it(`deletes by uid: a new Pod of the same name is kept (${version})`, async () => {
    assert.ok(bound !== undefined);
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(bound.kubeconfigPath);
    const firstUid = await createPod('web-0', NODE_A);
    // As a StatefulSet does: the old Pod gone (at once: no kubelet finishes it), a new one of the same name.
    const removed = await kubeCall(plane(), 'DELETE', `/api/v1/namespaces/${namespace}/pods/web-0`, { kind: 'DeleteOptions', apiVersion: 'v1', gracePeriodSeconds: 0 });
    assert.equal(removed.status, 200, JSON.stringify(removed.body));
    const secondUid = await createPod('web-0', NODE_A);
    assert.equal(await deletePodByUid(kubeConfig, { namespace, name: 'web-0', uid: firstUid }), 'replaced');
    const kept = await kubeCall(plane(), 'GET', `/api/v1/namespaces/${namespace}/pods/web-0`);
    assert.equal((kept.body['metadata'] as JsonObject)['uid'], secondUid);
    assert.equal((kept.body['metadata'] as JsonObject)['deletionTimestamp'], undefined);
    assert.equal(await deletePodByUid(kubeConfig, { namespace, name: 'web-0', uid: secondUid }), 'deleted');
    assert.equal(await deletePodByUid(kubeConfig, { namespace, name: 'never-was', uid: secondUid }), 'gone');
  });
});
