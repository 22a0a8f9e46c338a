import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { AppsV1Api, CoreV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { runStatusCli } from '../helpers/fleet-fixture.js';
import { forEachKubeVersion, servedPolicyApiVersion } from './control-plane.js';
import { apiError, createNamespace, deleteNamespaces, envoyImage, eventually, helmInstall, helmUninstall, plainPod, uniqueName, type Release } from './cluster.js';
import { startChartInjector, type ChartInjector } from './injector-process.js';
import { startPolicyController, type PolicyController } from './policy-controller-process.js';
import { guideUser } from './fleet-rbac.js';

/**
 * Issue 52, points 1 and 3, on the real API server: `status` sorts the Pods
 * whose proxy differs from the live template only in CPU and memory from
 * the rest, `status --resize` resizes them through `pods/resize` and
 * records the template, so that they count as current; the webhook (and so
 * an outage of it) has no part in a resize. 1.28 has no resize
 * subresource: `status` says so and leaves them to a restart.
 */

interface ResizeJson {
  resizeServed: boolean;
  workloads: { namespace: string; kind: string; name: string; current: number; outdated: number; resizable: number }[];
  totals: { outdated: number; resizable: number };
  resize?: {
    resized: { namespace: string; name: string; changes: { container: string; field: string; before?: string; after: string }[] }[];
    notResized: { namespace: string; name: string; why: string }[];
    pending: { namespace: string; name: string }[];
    failed: { namespace: string; name: string; error: string }[];
  };
}

const RESOURCES_A = { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } };
const RESOURCES_B = { requests: { cpu: '100m', memory: '96Mi' }, limits: { cpu: '1', memory: '256Mi' } };

/** As JSON: client-node gives class instances, which deepEqual tells from plain objects. */
function plain(value: unknown): unknown {
  return value === undefined ? undefined : JSON.parse(JSON.stringify(value));
}

function proxyOf(pod: V1Pod): V1Container | undefined {
  return [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find((container) => container.name === 'envoy');
}

forEachKubeVersion('status --resize: the proxy resized in place when only its resources change', (plane, version) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  // Whoever runs it holds the guide's ClusterRoles for status and --resize, nothing more.
  let user: Awaited<ReturnType<typeof guideUser>> | undefined;
  const ns = uniqueName('resize');
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  const status = (args: string[]) => runStatusCli(['--kubeconfig', user?.kubeconfig ?? '', '--injector-namespace', release?.namespace ?? '', '-n', ns, '-o', 'json', ...args]);
  const statusJson = async (args: string[] = []): Promise<{ code: number; report: ResizeJson }> => {
    const result = await status(args);
    assert.ok(result.code === 0 || result.code === 3, `status ${args.join(' ')}: exit ${result.code}: ${result.stderr}`);
    return { code: result.code, report: JSON.parse(result.stdout) as ResizeJson };
  };
  const pod = (name: string) => core().readNamespacedPod({ name, namespace: ns });
  const newTemplate = async (image: string, what: (pod: V1Pod) => boolean) =>
    eventually(`the new template (${image}) in a dry-run Pod`, async () => {
      const probe = await core().createNamespacedPod({ namespace: ns, body: plainPod(uniqueName('probe')), dryRun: 'All' });
      return envoyImage(probe) === image && what(probe) ? true : undefined;
    }, 60_000, 250);

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('rsz'), namespace: uniqueName('rsz-system') }, { proxy: { image: { tag: 'v1.39.0' }, resources: RESOURCES_A } });
    await createNamespace(plane(), ns, { 'envoy-injector.io/inject': 'enabled' });
    user = await guideUser(plane(), release.namespace, ns, 'resizer', ['envoy-injector-status', 'envoy-injector-resize'], ns);
    injector = await startChartInjector(plane(), release);
    await newTemplate('envoyproxy/envoy:v1.39.0', () => true);
    // Injected with the first template: its image changes next, so only a restart brings it current.
    await core().createNamespacedPod({ namespace: ns, body: plainPod('old-image') });
    await helmInstall(plane(), release, { proxy: { image: { tag: 'v1.39.1' } } }, { upgrade: true });
    await newTemplate('envoyproxy/envoy:v1.39.1', () => true);
    await plane().kubeConfig.makeApiClient(AppsV1Api).createNamespacedDeployment({
      namespace: ns,
      body: { metadata: { name: 'web' }, spec: { replicas: 2, strategy: { type: 'Recreate' }, selector: { matchLabels: { app: 'web' } }, template: { metadata: { labels: { app: 'web' } }, spec: { containers: [{ name: 'web', image: 'registry.example/web:1' }] } } } },
    });
    await core().createNamespacedPod({ namespace: ns, body: plainPod('solo') });
    // Pod-level resources (1.34+; 1.28 drops the field): padded by what the proxy adds.
    await core().createNamespacedPod({ namespace: ns, body: { ...plainPod('padded'), spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0', resources: { requests: { cpu: '100m', memory: '128Mi' } } }], resources: { requests: { cpu: '1', memory: '1Gi' }, limits: { cpu: '2', memory: '2Gi' } } } } as V1Pod });
    await eventually('5 Pods injected', async () => {
      const pods = (await core().listNamespacedPod({ namespace: ns })).items;
      return pods.length === 5 && pods.every((each) => envoyImage(each) !== undefined) ? true : undefined;
    }, 60_000, 250);
    // Only the proxy's CPU and memory change now.
    await helmInstall(plane(), release, { proxy: { resources: RESOURCES_B } }, { upgrade: true });
    await newTemplate('envoyproxy/envoy:v1.39.1', (probe) => proxyOf(probe)?.resources?.requests?.['cpu'] === '100m');
  });
  after(async () => {
    await injector?.stop().catch(() => undefined);
    await user?.remove();
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), [ns]);
  });

  it('status sorts the Pods that differ only in resources from the rest', async () => {
    const { code, report } = await statusJson();
    assert.equal(code, 3);
    const rows = report.workloads.map((workload) => `${workload.kind}/${workload.name} ${workload.outdated}/${workload.resizable}`);
    assert.deepEqual(rows, ['Deployment/web 2/2', 'Pod/old-image 1/0', 'Pod/padded 1/1', 'Pod/solo 1/1']);
    assert.equal(report.resizeServed, version !== '1.28');
    const table = await runStatusCli(['--kubeconfig', user?.kubeconfig ?? '', '--injector-namespace', release?.namespace ?? '', '-n', ns]);
    if (version === '1.28') assert.match(table.stdout, /4 of the outdated Pods differ from the live template only in CPU and memory, but this API server has no resize subresource \(Kubernetes before 1\.33\): --restart brings them current\./);
    else assert.match(table.stdout, /4 of the outdated Pods differ from the live template only in CPU and memory: --resize resizes them in place\./);
  });

  it('with the webhook down (failurePolicy Fail), status --resize resizes them through pods/resize and records the template', async () => {
    // The webhook matches Pod CREATE only: a resize and the status's patch never reach it (docs/design.md §6).
    await injector?.stop();
    injector = undefined;
    const refused = await core().createNamespacedPod({ namespace: ns, body: plainPod('while-down') }).then(() => undefined, apiError);
    assert.ok(refused !== undefined && /failed calling webhook/.test(refused.message), `a Pod CREATE needs the webhook: ${JSON.stringify(refused)}`);
    const before = await Promise.all(['solo', 'old-image'].map(pod));
    const { code, report } = await statusJson(['--resize', '--yes']);
    assert.equal(code, 3, 'old-image is still outdated');
    if (version === '1.28') {
      assert.deepEqual(report.resize?.resized, []);
      assert.equal(report.resize?.notResized.length, 4);
      assert.ok(report.resize?.notResized.every((entry) => /no resize subresource/.test(entry.why)), JSON.stringify(report.resize?.notResized));
      const solo = await pod('solo');
      assert.deepEqual(plain(proxyOf(solo)?.resources), RESOURCES_A);
      return;
    }
    const resized = report.resize?.resized.map((entry) => entry.name).sort() ?? [];
    // 1.34 refuses any resize of a Pod with Pod-level resources; 1.36 pads them again.
    const podLevelInPlace = version !== '1.34';
    assert.deepEqual(resized.filter((name) => !name.startsWith('web-')), podLevelInPlace ? ['padded', 'solo'] : ['solo']);
    assert.equal(resized.filter((name) => name.startsWith('web-')).length, 2);
    if (!podLevelInPlace) assert.deepEqual(report.resize?.notResized.map((entry) => `${entry.name}: ${entry.why}`), ['padded: the API server refused the resize: Pod "padded" is invalid: []: Forbidden: pods with pod-level resources cannot be resized']);
    assert.deepEqual(report.resize?.failed, []);
    for (const name of ['solo', ...resized.filter((each) => each.startsWith('web-'))]) {
      const after = await pod(name);
      assert.deepEqual(plain(proxyOf(after)?.resources), RESOURCES_B, `${name}'s proxy`);
      assert.equal(after.metadata?.uid, (name === 'solo' ? before[0] : after)?.metadata?.uid, 'the same Pod');
      assert.equal(after.status?.qosClass, 'Burstable');
    }
    const solo = await pod('solo');
    assert.equal(envoyImage(solo), envoyImage(before[0] ?? {}), 'nothing re-injected: the image is as it was');
    assert.deepEqual(solo.spec?.containers.map((container) => container.name), before[0]?.spec?.containers.map((container) => container.name));
    const oldImage = await pod('old-image');
    assert.equal(oldImage.metadata?.resourceVersion, before[1]?.metadata?.resourceVersion, 'a Pod that needs a restart is not touched');
    if (podLevelInPlace) {
      const padded = await pod('padded');
      assert.deepEqual(plain(padded.spec?.resources), { requests: { cpu: '1100m', memory: '1120Mi' }, limits: { cpu: '3', memory: '2304Mi' } });
    }
  });

  it('status afterwards: the resized Pods are current, the rest still outdated; a second --resize changes nothing', async () => {
    const { report } = await statusJson();
    const rows = report.workloads.map((workload) => `${workload.kind}/${workload.name} ${workload.current}/${workload.outdated}/${workload.resizable}`);
    if (version === '1.28') assert.deepEqual(rows, ['Deployment/web 0/2/2', 'Pod/old-image 0/1/0', 'Pod/padded 0/1/1', 'Pod/solo 0/1/1']);
    else if (version === '1.34') assert.deepEqual(rows, ['Deployment/web 2/0/0', 'Pod/old-image 0/1/0', 'Pod/padded 0/1/1', 'Pod/solo 1/0/0']);
    else assert.deepEqual(rows, ['Deployment/web 2/0/0', 'Pod/old-image 0/1/0', 'Pod/padded 1/0/0', 'Pod/solo 1/0/0']);
    const solo = await pod('solo');
    const again = await statusJson(['--resize', '--yes']);
    assert.deepEqual(again.report.resize?.resized, []);
    assert.equal((await pod('solo')).metadata?.resourceVersion, solo.metadata?.resourceVersion);
  });
});

forEachKubeVersion('status --resize in policy mode: the policy writes hashWithoutResources, and a resize re-injects nothing', (plane, version) => {
  if (servedPolicyApiVersion(version) === undefined) return;
  let release: Release | undefined;
  let controller: PolicyController | undefined;
  const ns = uniqueName('resize-policy');
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  const status = (args: string[]) => runStatusCli(['--kubeconfig', plane().kubeconfigPath, '--injector-namespace', release?.namespace ?? '', '-n', ns, '-o', 'json', ...args]);
  const dryRunCpu = async (): Promise<string | undefined> => proxyOf(await core().createNamespacedPod({ namespace: ns, body: plainPod(uniqueName('probe')), dryRun: 'All' }))?.resources?.requests?.['cpu'];

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('rszp'), namespace: uniqueName('rszp-system') }, { mode: 'policy', proxy: { resources: RESOURCES_A } });
    await createNamespace(plane(), ns, { 'envoy-injector.io/inject': 'enabled' });
    controller = await startPolicyController(plane(), release);
    await eventually('the policy injecting', async () => ((await dryRunCpu()) === '50m' ? true : undefined), 60_000, 250);
    await core().createNamespacedPod({ namespace: ns, body: plainPod('by-policy') });
    await helmInstall(plane(), release, { proxy: { resources: RESOURCES_B } }, { upgrade: true });
    await eventually('the policy with the new resources', async () => ((await dryRunCpu()) === '100m' ? true : undefined), 60_000, 250);
  });
  after(async () => {
    await controller?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), [ns]);
  });

  it('the Pod the policy injected is resizable, resized, current; its containers as they were', async () => {
    const before = await core().readNamespacedPod({ name: 'by-policy', namespace: ns });
    const seen = JSON.parse((await status([])).stdout) as ResizeJson;
    assert.deepEqual(seen.workloads.map((workload) => `${workload.name} ${workload.outdated}/${workload.resizable}`), ['by-policy 1/1']);
    const result = await status(['--resize', '--yes']);
    assert.equal(result.code, 0, result.stderr);
    assert.deepEqual((JSON.parse(result.stdout) as ResizeJson).resize?.resized.map((entry) => entry.name), ['by-policy']);
    const after = await core().readNamespacedPod({ name: 'by-policy', namespace: ns });
    assert.deepEqual(plain(proxyOf(after)?.resources), RESOURCES_B);
    const names = (pod: V1Pod) => [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].map((container) => `${container.name} ${container.image}`);
    assert.deepEqual(names(after), names(before), 'nothing added, nothing re-injected');
    assert.equal(after.metadata?.uid, before.metadata?.uid);
    const again = JSON.parse((await status([])).stdout) as ResizeJson;
    assert.deepEqual(again.workloads.map((workload) => `${workload.name} ${workload.current}/${workload.outdated}`), ['by-policy 1/0']);
  });
});
