import assert from 'node:assert/strict';
import { after, before, it, type TestContext } from 'node:test';
import { CoreV1Api } from '@kubernetes/client-node';
import { forEachKubeVersion, servedPolicyApiVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, envoyImage, eventually, followLiveChange, LIVE_CHANGE_TARGET_MS, helmInstall, helmUninstall, plainPod, sidecar, uniqueName, type Release } from './cluster.js';
import { OPT_IN_ANNOTATION, startOptInWebhook } from './opt-in-webhook.js';
import { readyz, startPolicyController, type PolicyController } from './policy-controller-process.js';
import { kubeCall } from './policy-parity.js';
import { metricSample } from '../helpers/metric-sample.js';
import { getMetrics } from './apiserver-metrics.js';

const TEMPLATES_ANNOTATION = 'envoy-injector.io/templates';

forEachKubeVersion('policy mode installed by the chart', (plane, version) => {
  const apiVersion = servedPolicyApiVersion(version);
  if (apiVersion === undefined) {
    it('helm install --set mode=policy is refused, saying what 1.34-1.35 need and that 1.36 needs nothing', async () => {
      const release = { name: uniqueName('policy'), namespace: uniqueName('policy-system') };
      await assert.rejects(
        helmInstall(plane(), release, { mode: 'policy' }),
        /mode: policy needs the MutatingAdmissionPolicy API, which this cluster does not serve\. Kubernetes 1\.36\+ serves admissionregistration\.k8s\.io\/v1 with no flag; on 1\.34-1\.35 the API server needs --feature-gates=MutatingAdmissionPolicy=true/s,
      );
      await deleteNamespaces(plane(), [release.namespace]);
    });
    return;
  }

  let release: Release | undefined;
  let controller: PolicyController | undefined;
  const enabled = uniqueName('policy-enabled');
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  const policyName = () => `${release?.name}-envoy-injector-${release?.namespace}`;
  /** The policy or binding as the API server serves it (through the version it serves); undefined when absent. */
  async function read(resource: 'mutatingadmissionpolicies' | 'mutatingadmissionpolicybindings'): Promise<Record<string, unknown> | undefined> {
    const response = await kubeCall(plane(), 'GET', `/apis/admissionregistration.k8s.io/${apiVersion}/${resource}/${policyName()}`);
    if (response.status === 404) return undefined;
    assert.equal(response.status, 200, `GET ${resource}: ${response.status}`);
    return response.body;
  }
  let probes = 0;
  const dryRunPod = () => core().createNamespacedPod({ namespace: enabled, body: plainPod(`probe-${++probes}`), dryRun: 'All' });

  const startController = async (): Promise<PolicyController> => {
    assert.ok(release !== undefined);
    return startPolicyController(plane(), release);
  };



  async function policyTemplates(): Promise<string | undefined> {
    const policy = (await read('mutatingadmissionpolicies')) as { metadata?: { annotations?: Record<string, string> } } | undefined;
    return policy?.metadata?.annotations?.[TEMPLATES_ANNOTATION];
  }

  async function setTemplate(config: string): Promise<void> {
    assert.ok(release !== undefined);
    await core().patchNamespacedConfigMap(
      { name: 'envoy-initializer', namespace: release.namespace, body: [{ op: 'replace', path: '/data/config', value: config }] },
    );
  }

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('policy'), namespace: uniqueName('policy-system') }, { mode: 'policy' });
    await createNamespace(plane(), enabled, { 'envoy-injector.io/inject': 'enabled' });
    controller = await startController();
  });
  after(async () => {
    await controller?.stop();
    if (release !== undefined) {
      await helmUninstall(plane(), release).catch(() => undefined);
      for (const resource of ['mutatingadmissionpolicybindings', 'mutatingadmissionpolicies']) {
        await kubeCall(plane(), 'DELETE', `/apis/admissionregistration.k8s.io/${apiVersion}/${resource}/${policyName()}`).catch(() => undefined);
      }
    }
    await deleteNamespaces(plane(), [enabled]);
  });

  it(`installs no webhook and no admission object; the injector applies the policy and binding through ${apiVersion} as its ServiceAccount, owned by the release's ClusterRole, and becomes ready`, async () => {
    assert.ok(release !== undefined && controller !== undefined);
    const kinds = release.manifests.map((manifest) => manifest.kind);
    for (const kind of ['MutatingWebhookConfiguration', 'Service', 'MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding']) assert.ok(!kinds.includes(kind), `no ${kind} in the release`);
    const port = controller.port;
    await eventually('/readyz 200 (the policy matches the templates)', async () => ((await readyz(port)) === 200 ? true : undefined), 20_000);
    assert.match((await policyTemplates()) ?? '', /^config=sha256:[0-9a-f]{16}$/);
    const role = release.manifests.find((manifest) => manifest.kind === 'ClusterRole');
    assert.ok(role !== undefined);
    const roleUid = ((await kubeCall(plane(), 'GET', `/apis/rbac.authorization.k8s.io/v1/clusterroles/${role.metadata.name}`)).body['metadata'] as { uid?: string }).uid;
    for (const resource of ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'] as const) {
      const object = (await read(resource)) as { apiVersion?: string; metadata?: { ownerReferences?: unknown; managedFields?: { manager?: string; apiVersion?: string }[] } } | undefined;
      assert.ok(object !== undefined, `${resource} exists`);
      assert.deepEqual(object.metadata?.ownerReferences, [{ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: role.metadata.name, uid: roleUid }]);
      const ours = object.metadata?.managedFields?.find((entry) => entry.manager === 'envoy-injector');
      assert.equal(ours?.apiVersion, `admissionregistration.k8s.io/${apiVersion}`, `${resource}: applied through ${apiVersion}`);
    }
    const forbidden = controller.logs.filter((line) => /\b403\b|forbidden/i.test(line));
    assert.deepEqual(forbidden, [], 'every call the injector made was allowed by the chart\'s RBAC');
  });

  it('injects with the injector stopped: the API server applies the policy itself', async () => {
    assert.ok(controller !== undefined);
    await controller.stop();
    try {
      assert.notEqual(controller.child.exitCode ?? controller.child.signalCode, null, 'the injector process has exited');
      // The API server loads a new policy through its own informer: wait for it to act.
      await eventually('the API server to apply the policy (a dry-run Pod)', async () => (envoyImage(await dryRunPod()) === undefined ? undefined : true), 20_000, 100);
      const pod = await core().createNamespacedPod({ namespace: enabled, body: plainPod('while-stopped') });
      assert.match(envoyImage(pod) ?? '', /^envoyproxy\/envoy:v\d/);
      assert.equal(pod.spec?.initContainers?.[0]?.restartPolicy, 'Always', `native sidecar (nativeSidecar: auto on ${version})`);
      assert.ok(pod.metadata?.annotations?.['envoy-injector.io/status'] !== undefined);
    } finally {
      controller = await startController();
    }
  });

  it('the rerun that the token mount causes on a native Pod the policy injected stops at its match condition (nothing-to-reorder): the mutation runs once per Pod', async () => {
    const checks = async (): Promise<number> => metricSample(await getMetrics(plane()), 'apiserver_mutating_admission_policy_check_total', { policy: policyName() }) ?? 0;
    const before = await checks();
    for (let index = 0; index < 5; index++) {
      const pod = await core().createNamespacedPod({ namespace: enabled, body: plainPod(`once-${index}`) });
      assert.deepEqual(pod.spec?.initContainers?.map((container) => container.name), ['envoy'], 'a native sidecar, the only init container');
      assert.ok(pod.spec?.initContainers?.[0]?.volumeMounts?.some((mount) => mount.name.startsWith('kube-api-access-')), 'the token mounted after the policy: the API server reran the chain');
    }
    assert.equal((await checks()) - before, 5, 'one mutation per Pod: the rerun was not matched');
  });

  it('a Pod that a webhook opts in after the policy ran is injected: the API server reinvokes the policy (IfNeeded) after that change', async () => {
    // Admission runs the policies before the webhooks: the opt-in comes later, as a webhook's would.
    const label = uniqueName('policy-reinvoke');
    const [plain, ordinary] = [uniqueName('policy-plain'), uniqueName('policy-ordinary')];
    await Promise.all([createNamespace(plane(), plain, { 'reinvocation-test': label }), createNamespace(plane(), ordinary)]);
    const optIn = await startOptInWebhook(plane(), uniqueName('zz-opt-in'), { 'reinvocation-test': label });
    try {
      await eventually('the second webhook annotating Pods', async () => ((await core().createNamespacedPod({ namespace: plain, body: plainPod(`probe-${++probes}`), dryRun: 'All' })).metadata?.annotations?.[OPT_IN_ANNOTATION] === 'true' ? true : undefined), 20_000, 200);
      const calls = optIn.calls();
      const later = await core().createNamespacedPod({ namespace: plain, body: plainPod('opted-in-later') });
      assert.equal(later.metadata?.annotations?.[OPT_IN_ANNOTATION], 'true', 'the second webhook annotated it');
      assert.notEqual(sidecar(later), 'none', 'injected when the policy was reinvoked after the opt-in');
      assert.ok(later.metadata?.annotations?.['envoy-injector.io/status'] !== undefined);
      assert.equal(optIn.calls() - calls, 1, 'the second webhook (reinvocationPolicy Never) once');
      const plainOne = await core().createNamespacedPod({ namespace: ordinary, body: plainPod('ordinary') });
      assert.equal(sidecar(plainOne), 'none', 'a Pod nobody opts in stays as it was');
    } finally {
      await optIn.stop();
      await deleteNamespaces(plane(), [plain, ordinary]);
    }
  });

  it(`a ConfigMap change updates the policy and reaches the next Pod (target ${LIVE_CHANGE_TARGET_MS / 1000} s)`, async (t: TestContext) => {
    assert.ok(controller !== undefined);
    const before = await policyTemplates();
    const changed = performance.now();
    await setTemplate('containers:\n  - name: envoy\n    image: envoyproxy/envoy:v1.99.1\n');
    await followLiveChange(t, 'the new image in a dry-run Pod', changed, async () => (envoyImage(await dryRunPod()) === 'envoyproxy/envoy:v1.99.1' ? true : undefined));
    assert.notEqual(await policyTemplates(), before);
    const port = controller.port;
    await eventually('/readyz 200 again', async () => ((await readyz(port)) === 200 ? true : undefined), 10_000);
  });

  it('an invalid change keeps the last good policy, and the injector stays ready', async () => {
    assert.ok(controller !== undefined);
    const before = await policyTemplates();
    const logged = controller.logs.length;
    await setTemplate('containers:\n  - name: NOT_A_NAME\n');
    const logs = controller.logs;
    await eventually('the injector to reject the template', async () => (logs.slice(logged).some((line) => line.includes('invalid sidecar template')) ? true : undefined), 10_000);
    assert.equal(await policyTemplates(), before, 'the policy is unchanged');
    assert.equal(envoyImage(await dryRunPod()), 'envoyproxy/envoy:v1.99.1', 'Pods still get the last good template');
    assert.equal(await readyz(controller.port), 200);
  });

  it('a template past a CEL limit keeps the last good policy; /readyz and a metric say why, until a good one', async () => {
    assert.ok(controller !== undefined);
    const before = await policyTemplates();
    const port = controller.port;
    await setTemplate(`containers:\n  - name: envoy\n    image: envoyproxy/envoy:v1.99.2\n    args: ["${'x'.repeat(100 * 1024)}"]\n`);
    await eventually('/readyz 503', async () => ((await readyz(port)) === 503 ? true : undefined), 10_000);
    const body = await (await fetch(`http://127.0.0.1:${port}/readyz`)).text();
    assert.match(body, /the API server refuses CEL expressions over 100,000/);
    assert.equal(metricSample(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(), 'envoy_injector_policy_templates_refused'), 1);
    assert.equal(await policyTemplates(), before, 'the last good policy stays');
    assert.equal(envoyImage(await dryRunPod()), 'envoyproxy/envoy:v1.99.1');
    await setTemplate('containers:\n  - name: envoy\n    image: envoyproxy/envoy:v1.99.3\n');
    await eventually('/readyz 200 with a good template', async () => ((await readyz(port)) === 200 ? true : undefined), 10_000);
    assert.equal(metricSample(await (await fetch(`http://127.0.0.1:${port}/metrics`)).text(), 'envoy_injector_policy_templates_refused'), 0);
  });

  it('a policy deleted by hand is applied again, and /readyz says so meanwhile', async () => {
    assert.ok(controller !== undefined);
    const before = await policyTemplates();
    const deleted = await kubeCall(plane(), 'DELETE', `/apis/admissionregistration.k8s.io/${apiVersion}/mutatingadmissionpolicies/${policyName()}`);
    assert.equal(deleted.status, 200);
    await eventually('the policy back (the controller checks every 10 s)', async () => ((await policyTemplates()) === before ? true : undefined), 40_000, 250);
    const port = controller.port;
    await eventually('/readyz 200 again', async () => ((await readyz(port)) === 200 ? true : undefined), 10_000);
  });

  it('helm uninstall removes the policy and the binding: the garbage collector follows their owner, the release\'s ClusterRole', async () => {
    assert.ok(release !== undefined);
    await controller?.stop();
    controller = undefined;
    await helmUninstall(plane(), release);
    for (const resource of ['mutatingadmissionpolicies', 'mutatingadmissionpolicybindings'] as const) {
      await eventually(`${resource} ${policyName()} deleted by the garbage collector`, async () => ((await read(resource)) === undefined ? true : undefined), 60_000, 250);
    }
    // The API server's own informer drops the deleted policy a moment later.
    await eventually('no injection once the release is gone (a dry-run Pod)', async () => (envoyImage(await dryRunPod()) === undefined ? true : undefined), 20_000, 100);
  });
});
