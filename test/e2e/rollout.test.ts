import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, it } from 'node:test';
import { AppsV1Api, CoordinationV1Api, CoreV1Api, PatchStrategy, setHeaderOptions, type V1Deployment } from '@kubernetes/client-node';
import { httpsCall } from '../helpers/https-client.js';
import { metricSample } from '../helpers/metric-sample.js';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, envoyImage, eventually, helmInstall, helmUninstall, uniqueName, type Release } from './cluster.js';
import { startChartInjector, type ChartInjector } from './injector-process.js';

/**
 * The rollout by budget (docs/fleet.md) on a real API server, with
 * kube-controller-manager's Deployment and ReplicaSet controllers: the
 * injector runs as the chart's ServiceAccount with `rollout.enabled` (its
 * RBAC exactly the chart's), holds the Lease, and after a template change
 * restarts the outdated Deployments one at a time (budget 1), each next one
 * only once the last one's Pods are Ready, never a paused namespace or
 * workload, and stops after a Deployment exceeds its progress deadline, with
 * a RolloutFailed Warning; a later change of the proxy's CPU and memory alone
 * resizes the rolled Pods in place (restarts them on 1.28, which has no
 * pods/resize). There is no kubelet: the test marks Pods Ready
 * through their status subresource (`markReady`), as a kubelet would.
 */

const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';
const PAUSE = { 'envoy-injector.io/rollout': 'paused' };

forEachKubeVersion('the rollout by budget against the API server and its controllers', (plane) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  // Named so that the report's order (namespace, kind, name) is the order written here.
  const suffix = uniqueName('ro').slice(3);
  const ns = { a: `ro-a-${suffix}`, b: `ro-b-${suffix}`, paused: `ro-bp-${suffix}`, fail: `ro-c-${suffix}`, after: `ro-d-${suffix}` };
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  const apps = () => plane().kubeConfig.makeApiClient(AppsV1Api);
  /** Deployments (`namespace/app`) whose new Pods the stand-in kubelet leaves unready: of another template hash than at the start. */
  const held = new Set<string>();
  const firstHashes = new Set<string>();
  let kubelet: Promise<void> | undefined;
  let kubeletStop = false;

  /** As a kubelet would: each Pod of our namespaces Running and Ready (those not held back), through pods/status. */
  const markReady = async (): Promise<void> => {
    for (const namespace of Object.values(ns)) {
      for (const pod of (await core().listNamespacedPod({ namespace })).items) {
        const name = pod.metadata?.name ?? '';
        const ready = pod.status?.conditions?.some((condition) => condition.type === 'Ready' && condition.status === 'True') === true;
        const app = `${namespace}/${pod.metadata?.labels?.['app'] ?? ''}`;
        const newPod = !firstHashes.has(`${app}/${pod.metadata?.labels?.['pod-template-hash'] ?? ''}`);
        if (ready || pod.metadata?.deletionTimestamp !== undefined || (held.has(app) && newPod)) continue;
        const now = new Date(Date.now() - 60_000).toISOString();
        const conditions = ['PodScheduled', 'Initialized', 'ContainersReady', 'Ready'].map((type) => ({ type, status: 'True', lastTransitionTime: now }));
        await core().patchNamespacedPodStatus({ name, namespace, body: { status: { phase: 'Running', conditions } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch)).catch(() => undefined);
      }
    }
  };
  const deployment = (namespace: string, name: string): Promise<V1Deployment> => apps().readNamespacedDeployment({ name, namespace });
  const restartedAt = async (namespace: string, name: string): Promise<string | undefined> => (await deployment(namespace, name)).spec?.template.metadata?.annotations?.[RESTARTED_AT];
  const restarted = async (): Promise<string[]> => {
    const found: string[] = [];
    for (const [key, namespace] of Object.entries(ns)) {
      for (const item of (await apps().listNamespacedDeployment({ namespace })).items) if (item.spec?.template.metadata?.annotations?.[RESTARTED_AT] !== undefined) found.push(`${key}/${item.metadata?.name ?? ''}`);
    }
    return found.sort();
  };
  const settled = (namespace: string, name: string) =>
    eventually(`Deployment ${namespace}/${name} rolled and available`, async () => {
      const object = await deployment(namespace, name);
      const status = object.status;
      return status?.observedGeneration === object.metadata?.generation && status?.updatedReplicas === 1 && status?.availableReplicas === 1 && status?.replicas === 1 ? true : undefined;
    }, 60_000, 250);
  const metrics = async (): Promise<string> => (await httpsCall(`https://${injector?.host ?? ''}:${injector?.port ?? 0}/metrics`, { ca: '', extra: { rejectUnauthorized: false } })).body;

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('ro'), namespace: uniqueName('ro-system') }, { proxy: { image: { tag: 'v1.39.0' } }, rollout: { enabled: true, maxConcurrent: 1, readyTimeout: '120s' } });
    for (const namespace of Object.values(ns)) await createNamespace(plane(), namespace, { 'envoy-injector.io/inject': 'enabled' });
    await core().patchNamespace({ name: ns.paused, body: { metadata: { annotations: PAUSE } } }, setHeaderOptions('Content-Type', PatchStrategy.MergePatch));
    injector = await startChartInjector(plane(), release);
    await eventually('a first Pod injected through the API server', async () => {
      const pod = await core().createNamespacedPod({ namespace: ns.a, body: { metadata: { name: 'warmup' }, spec: { containers: [{ name: 'app', image: 'registry.example/app:1' }] } }, dryRun: 'All' });
      return envoyImage(pod) === undefined ? undefined : true;
    }, 30_000, 200);
    const create = (namespace: string, name: string, extra: { annotations?: Record<string, string>; progressDeadlineSeconds?: number } = {}) =>
      apps().createNamespacedDeployment({
        namespace,
        body: {
          metadata: { name, ...(extra.annotations === undefined ? {} : { annotations: extra.annotations }) },
          spec: {
            replicas: 1,
            ...(extra.progressDeadlineSeconds === undefined ? {} : { progressDeadlineSeconds: extra.progressDeadlineSeconds }),
            selector: { matchLabels: { app: name } },
            template: { metadata: { labels: { app: name } }, spec: { containers: [{ name: 'app', image: `registry.example/${name}:1` }] } },
          },
        },
      });
    await create(ns.a, 'a0', { annotations: PAUSE });
    await create(ns.a, 'a1');
    await create(ns.a, 'a2');
    await create(ns.b, 'b1');
    await create(ns.paused, 'p1');
    await create(ns.fail, 'f1', { progressDeadlineSeconds: 10 });
    await create(ns.after, 'd1');
    // The stand-in kubelet, until the test ends.
    kubelet = (async () => {
      while (!kubeletStop) {
        await markReady().catch(() => undefined);
        await sleep(300);
      }
    })();
    for (const [namespace, name] of [[ns.a, 'a0'], [ns.a, 'a1'], [ns.a, 'a2'], [ns.b, 'b1'], [ns.paused, 'p1'], [ns.fail, 'f1'], [ns.after, 'd1']] as const) await settled(namespace, name);
    for (const namespace of Object.values(ns)) {
      for (const pod of (await core().listNamespacedPod({ namespace })).items) firstHashes.add(`${namespace}/${pod.metadata?.labels?.['app'] ?? ''}/${pod.metadata?.labels?.['pod-template-hash'] ?? ''}`);
    }
    // a1's new Pods wait for the test's word; f1's never come up.
    held.add(`${ns.a}/a1`);
    held.add(`${ns.fail}/f1`);
  });
  after(async () => {
    kubeletStop = true;
    await kubelet;
    await injector?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), Object.values(ns));
  });

  it('one replica holds the Lease the chart names, and says so in its metrics; nothing is current-and-restarted', async () => {
    assert.ok(release !== undefined);
    const lease = await eventually('the rollout Lease held', async () => {
      const leases = await plane().kubeConfig.makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: release?.namespace ?? '' });
      const found = leases.items.find((item) => item.metadata?.name?.endsWith('-rollout') === true);
      return found?.spec?.holderIdentity === undefined ? undefined : found;
    }, 30_000, 250);
    assert.match(lease.spec?.holderIdentity ?? '', /_[0-9a-f-]{36}$/);
    await eventually('envoy_injector_rollout_leader 1', async () => (metricSample(await metrics(), 'envoy_injector_rollout_leader') === 1 ? true : undefined), 30_000, 500);
    assert.deepEqual(await restarted(), [], 'every workload is current: nothing restarted');
  });

  it('after a template change: one at a time (budget 1), one a namespace, each next once the last is Ready; paused ones never', async () => {
    assert.ok(release !== undefined);
    await helmInstall(plane(), release, { proxy: { image: { tag: 'v1.39.1' } }, rollout: { enabled: true, maxConcurrent: 1, readyTimeout: '120s' } }, { upgrade: true });
    // The failing Deployment's new Pods are never Ready: known by their template's hash once its ReplicaSet exists.
    const order: string[] = [];
    const seen = async (): Promise<string[]> => {
      for (const name of await restarted()) if (!order.includes(name)) order.push(name);
      return order;
    };
    await eventually('a/a1 restarted first', async () => ((await seen()).length > 0 ? true : undefined), 60_000, 250);
    assert.deepEqual(order, ['a/a1'], 'the paused a0 is skipped; a1 is first');
    // While a1's new Pod is not Ready, nothing else starts: not a2 (its namespace), not b1 (the budget). Two plan ticks (10 s) pass.
    await sleep(25_000);
    assert.deepEqual(await seen(), ['a/a1'], 'nothing started while a1\'s new Pod is not Ready');
    assert.equal(metricSample(await metrics(), 'envoy_injector_rollout_in_flight'), 1);
    held.delete(`${ns.a}/a1`);
    await settled(ns.a, 'a1');
    await eventually('a/a2 next', async () => ((await seen()).includes('a/a2') ? true : undefined), 60_000, 250);
    await settled(ns.a, 'a2');
    await eventually('b/b1 next', async () => ((await seen()).includes('b/b1') ? true : undefined), 60_000, 250);
    await settled(ns.b, 'b1');
    await eventually('fail/f1 next (the paused namespace is skipped)', async () => ((await seen()).includes('fail/f1') ? true : undefined), 60_000, 250);
    assert.deepEqual(order, ['a/a1', 'a/a2', 'b/b1', 'fail/f1']);
    assert.equal(await restartedAt(ns.a, 'a0'), undefined, 'the paused workload is never restarted');
    assert.equal(await restartedAt(ns.paused, 'p1'), undefined, 'the paused namespace is never touched');
  });

  it('a Deployment past its progress deadline: a RolloutFailed Warning on it, the stop in the Lease, nothing more started', async () => {
    const event = await eventually('the RolloutFailed Event', async () => {
      const events = await plane().kubeConfig.makeApiClient(CoreV1Api).listNamespacedEvent({ namespace: ns.fail });
      return events.items.find((item) => item.reason === 'RolloutFailed');
    }, 90_000, 500);
    assert.equal(event.type, 'Warning');
    assert.equal(event.involvedObject.kind, 'Deployment');
    assert.equal(event.involvedObject.name, 'f1');
    assert.match(event.message ?? '', /progress deadline exceeded/);
    const stop = await eventually('the stop in the Lease', async () => {
      const lease = (await plane().kubeConfig.makeApiClient(CoordinationV1Api).listNamespacedLease({ namespace: release?.namespace ?? '' })).items.find((item) => item.metadata?.name?.endsWith('-rollout') === true);
      return lease?.metadata?.annotations?.['envoy-injector.io/rollout-stopped'];
    }, 30_000, 250);
    assert.equal((JSON.parse(stop) as { name: string }).name, 'f1');
    const text = await metrics();
    assert.equal(metricSample(text, 'envoy_injector_rollout_stopped'), 1);
    assert.equal(metricSample(text, 'envoy_injector_rollout_workloads_total', { outcome: 'failed' }), 1);
    // d1 (after it in the order) is left: the rollout is stopped. Two plan ticks (10 s each) pass first.
    await sleep(25_000);
    assert.equal(await restartedAt(ns.after, 'd1'), undefined, 'nothing started after the failure');
  });

  it("a change of the proxy's CPU and memory alone lifts the stop and resizes the rolled Pods in place, no restart (1.28, with no pods/resize: restarted)", async () => {
    assert.ok(release !== undefined);
    const resizeServed = plane().version !== '1.28';
    const before = await restartedAt(ns.a, 'a1');
    assert.notEqual(before, undefined);
    const resources = { requests: { cpu: '60m', memory: '80Mi' }, limits: { cpu: '600m', memory: '300Mi' } };
    await helmInstall(plane(), release, { proxy: { image: { tag: 'v1.39.1' }, resources }, rollout: { enabled: true, maxConcurrent: 1, readyTimeout: '120s' } }, { upgrade: true });
    for (const [namespace, name] of [[ns.a, 'a1'], [ns.a, 'a2'], [ns.b, 'b1']] as const) {
      await eventually(`${namespace}/${name}'s proxy resized to 60m/80Mi`, async () => {
        const pods = (await core().listNamespacedPod({ namespace, labelSelector: `app=${name}` })).items.filter((pod) => pod.metadata?.deletionTimestamp === undefined);
        const proxies = pods.map((pod) => [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])].find((container) => container.image?.includes('envoy') === true));
        return pods.length === 1 && proxies.every((proxy) => proxy?.resources?.requests?.['cpu'] === '60m' && proxy.resources.limits?.['memory'] === '300Mi') ? true : undefined;
      }, 90_000, 500);
    }
    const resized = metricSample(await metrics(), 'envoy_injector_rollout_workloads_total', { outcome: 'resized' }) ?? 0;
    if (resizeServed) {
      assert.equal(await restartedAt(ns.a, 'a1'), before, 'a1 resized in place, not restarted again');
      assert.ok(resized >= 3, `resized ${resized} workloads, expected a1, a2 and b1`);
    } else {
      assert.notEqual(await restartedAt(ns.a, 'a1'), before, 'no resize on 1.28: a1 restarted again');
      assert.equal(resized, 0);
    }
  });
});
