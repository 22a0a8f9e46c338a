import assert from 'node:assert/strict';
import { after, before, describe, it, type TestContext } from 'node:test';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { selectedVersions, startControlPlane, type OwnedControlPlane } from './control-plane.js';
import { createNamespace, createPodsContinuously, envoyImage, eventually, helmInstall, helmUninstall, plainPod, uniqueName, type Release } from './cluster.js';
import { readyz, startPolicyController, type PolicyController } from './policy-controller-process.js';
import { kubeCall } from './policy-parity.js';

/**
 * A cluster that ran policy mode on v1beta1 (Kubernetes 1.35, or 1.36 with
 * the beta turned on) loses v1beta1: what an upgrade from 1.35 to 1.36 does.
 * On the real 1.36 binaries, one control plane of its own (the test restarts
 * its API server): started with --runtime-config=admissionregistration.k8s.io/v1beta1=true,
 * policy mode installed with policy.apiVersion=v1beta1 so that every object is
 * written through v1beta1 as a 1.35 install writes them (a 1.36 API server
 * serves v1 beside it, which `auto` would take), then the API server
 * restarted on the same etcd without the flag.
 */
const GROUP = 'admissionregistration.k8s.io';
const RESOURCES = ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'] as const;

describe('policy mode across the loss of v1beta1 (Kubernetes 1.36, an upgrade from 1.35)', { skip: !selectedVersions().includes('1.36') && 'Kubernetes 1.36 is not in E2E_KUBE_VERSIONS' }, () => {
  let plane: OwnedControlPlane | undefined;
  let release: Release | undefined;
  let controller: PolicyController | undefined;
  const enabled = uniqueName('upgrade-enabled');
  const cluster = (): OwnedControlPlane => {
    assert.ok(plane !== undefined, 'the control plane started');
    return plane;
  };
  const name = (): string => `${release?.name}-envoy-injector-${release?.namespace}`;
  const read = (version: string, resource: string) => kubeCall(cluster(), 'GET', `/apis/${GROUP}/${version}/${resource}/${name()}`);
  /** The API version of our field manager's entry: the version the controller last applied through. */
  const appliedThrough = async (resource: string): Promise<string | undefined> => {
    const response = await read('v1', resource);
    const fields = ((response.body['metadata'] as { managedFields?: { manager?: string; apiVersion?: string }[] } | undefined)?.managedFields ?? []);
    return fields.find((entry) => entry.manager === 'envoy-injector')?.apiVersion;
  };
  const createPod = async (podName: string): Promise<V1Pod> =>
    cluster().kubeConfig.makeApiClient(CoreV1Api).createNamespacedPod({ namespace: enabled, body: plainPod(podName) });

  before(async () => {
    plane = await startControlPlane('1.36', { betaPolicyApi: true });
    release = await helmInstall(plane, { name: uniqueName('upgrade'), namespace: uniqueName('upgrade-system') }, { mode: 'policy', policy: { apiVersion: 'v1beta1' } });
    await createNamespace(plane, enabled, { 'envoy-injector.io/inject': 'enabled' });
    controller = await startPolicyController(plane, release);
  });
  after(async () => {
    await controller?.stop();
    await plane?.stop();
  });

  it('before: the policy and binding are written through v1beta1 and inject', async () => {
    assert.ok(controller !== undefined);
    const port = controller.port;
    await eventually('/readyz 200', async () => ((await readyz(port)) === 200 ? true : undefined), 30_000);
    for (const resource of RESOURCES) assert.equal(await appliedThrough(resource), `${GROUP}/v1beta1`, resource);
    const pod = await eventually('a Pod injected by the v1beta1 policy', async () => {
      const created = await createPod(uniqueName('before'));
      return envoyImage(created) === undefined ? undefined : created;
    }, 30_000, 250);
    assert.match(envoyImage(pod) ?? '', /^envoyproxy\/envoy:v\d/);
  });

  it('the API server restarted without v1beta1: every Pod is still injected, the objects are served as v1, and the controller moves them to v1 without a restart', async (t: TestContext) => {
    assert.ok(controller !== undefined);
    const stored = await etcdApiVersion(cluster(), `/registry/mutatingadmissionpolicies/${name()}`);
    t.diagnostic(`etcd holds the policy written through v1beta1 as ${stored}`);
    assert.equal(stored, `${GROUP}/v1beta1`, 'written through v1beta1 with the beta on, 1.36 stores it as v1beta1');
    const stream = createPodsContinuously(() => createPod(uniqueName('across')), { creators: 2, pauseMs: 100 });
    let restarted: number;
    try {
      await cluster().restartApiServer({ betaPolicyApi: false });
      restarted = stream.created.length;
      // Pods created after the restart, by the objects v1beta1 wrote, before the controller has moved anything.
      await eventually('Pods created after the restart', async () => (stream.created.length >= restarted + 10 ? true : undefined), 60_000, 200);
    } finally {
      await stream.stop();
    }
    const notInjected = stream.created.filter((pod) => envoyImage(pod) === undefined).map((pod) => pod.metadata?.name);
    t.diagnostic(`${stream.created.length} Pods created across the restart (${stream.created.length - restarted} after it), ${stream.refused.length} refused while the API server was down`);
    assert.deepEqual(notInjected, [], 'every Pod the API server stored was injected');
    // Refused only as an absent API server refuses: never by admission.
    for (const message of stream.refused) assert.doesNotMatch(message, /admission|policy|denied/i, message);

    for (const resource of RESOURCES) {
      assert.equal((await read('v1beta1', resource)).status, 404, `${resource}: v1beta1 is no longer served`);
      assert.equal((await read('v1', resource)).status, 200, `${resource}: the same object, served as v1`);
    }
    for (const resource of RESOURCES) {
      await eventually(`${resource} applied again through v1 by the running controller`, async () => ((await appliedThrough(resource)) === `${GROUP}/v1` ? true : undefined), 60_000, 250);
    }
    const port = controller.port;
    await eventually('/readyz 200 through v1', async () => ((await readyz(port)) === 200 ? true : undefined), 30_000);
    const restored = await etcdApiVersion(cluster(), `/registry/mutatingadmissionpolicies/${name()}`);
    t.diagnostic(`etcd holds the policy applied again through v1 as ${restored}`);
    // 1.36 keeps the beta's storage version, which a rollback to 1.35 can still read; it serves the objects as v1.
    assert.equal(restored, `${GROUP}/v1beta1`);
    assert.ok(
      controller.logs.some((line) => line.includes(`using ${GROUP}/v1 (v1beta1 was asked for, but is not served)`)),
      'the controller says why it moved',
    );
    assert.match(envoyImage(await createPod(uniqueName('after'))) ?? '', /^envoyproxy\/envoy:v\d/);
  });

  it('helm upgrade works (the release holds no admission object), back to policy.apiVersion=auto, and uninstall removes the policy and binding', async () => {
    assert.ok(release !== undefined && controller !== undefined);
    release = await helmInstall(cluster(), release, { policy: { apiVersion: 'auto' } }, { upgrade: true });
    await controller.stop();
    controller = await startPolicyController(cluster(), release);
    const port = controller.port;
    await eventually('/readyz 200 after the upgrade', async () => ((await readyz(port)) === 200 ? true : undefined), 30_000);
    for (const resource of RESOURCES) assert.equal(await appliedThrough(resource), `${GROUP}/v1`, resource);
    await controller.stop();
    controller = undefined;
    await helmUninstall(cluster(), release);
    for (const resource of RESOURCES) {
      await eventually(`${resource} deleted by the garbage collector`, async () => ((await read('v1', resource)).status === 404 ? true : undefined), 60_000, 250);
    }
  });
});

/**
 * The apiVersion an object is stored as in etcd, read through etcd's JSON
 * gateway: the API server writes protobuf behind a `k8s\0` prefix, whose
 * TypeMeta (apiVersion, kind) is plain text at the start.
 */
async function etcdApiVersion(plane: OwnedControlPlane, key: string): Promise<string> {
  const response = await fetch(`${plane.etcdUrl}/v3/kv/range`, { method: 'POST', body: JSON.stringify({ key: Buffer.from(key).toString('base64') }) });
  const body = (await response.json()) as { kvs?: { value?: string }[] };
  const value = body.kvs?.[0]?.value;
  if (value === undefined) throw new Error(`etcd has no key ${key}`);
  const match = /admissionregistration\.k8s\.io\/v1(?:beta1|alpha1)?/.exec(Buffer.from(value, 'base64').toString('latin1'));
  if (match === null) throw new Error(`etcd key ${key}: no admissionregistration apiVersion in its value`);
  return match[0];
}
