import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { AppsV1Api, CoreV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { InjectedLabel, SERVICE_ACCOUNT_TOKEN_PATH } from '../../src/injection/index.js';
import { callsBetween, webhookCalls, type WebhookCalls } from './apiserver-metrics.js';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, plainPod, sidecar, uniqueName, webhookNames, type Release } from './cluster.js';
import { forEachKubeVersion } from './control-plane.js';
import { startChartInjector, type ChartInjector } from './injector-process.js';
import { OPT_IN_ANNOTATION, startOptInWebhook, type OptInWebhook } from './opt-in-webhook.js';

// The release's webhook names (its own: <purpose>.<configuration>.envoy-injector.io), set once it is installed.
let ENABLED_WEBHOOK = '';
let OPTED_IN_WEBHOOK = '';
let OTHER_WEBHOOK = '';

/** Every container the injector added, with where it mounts the ServiceAccount token. */
function addedTokenMounts(pod: V1Pod): string[] {
  const containers: V1Container[] = [...(pod.spec?.initContainers ?? []), ...(pod.spec?.containers ?? [])];
  const ours = new Set(['envoy', 'envoy-init']);
  return containers
    .filter((container) => ours.has(container.name))
    .map((container) => `${container.name}: ${container.volumeMounts?.filter((mount) => mount.mountPath === SERVICE_ACCOUNT_TOKEN_PATH).map((mount) => `${mount.name} readOnly=${String(mount.readOnly)}`).join(', ') ?? 'none'}`);
}

const countOf = (calls: ReadonlyMap<string, WebhookCalls>, name: string): number => calls.get(name)?.count ?? 0;

forEachKubeVersion('reinvocation: what a Pod CREATE costs in webhook calls, by the API server\'s own metric', (plane) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  let optIn: OptInWebhook | undefined;
  const label = uniqueName('reinvoke');
  // plain: the second webhook opts its Pods in (once started); ordinary: nobody does.
  const ns = { enabled: uniqueName('enabled'), plain: uniqueName('plain'), ordinary: uniqueName('ordinary') };
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  const create = (namespace: string, pod: V1Pod, dryRun?: 'All') => core().createNamespacedPod({ namespace, body: pod, ...(dryRun === undefined ? {} : { dryRun }) });
  let probes = 0;

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('mesh'), namespace: uniqueName('mesh-system') });
    [ENABLED_WEBHOOK = '', OPTED_IN_WEBHOOK = '', OTHER_WEBHOOK = ''] = webhookNames(release);
    await Promise.all([
      createNamespace(plane(), ns.enabled, { 'envoy-injector.io/inject': 'enabled' }),
      createNamespace(plane(), ns.plain, { 'reinvocation-test': label }),
      createNamespace(plane(), ns.ordinary),
    ]);
    injector = await startChartInjector(plane(), release);
    await eventually('a first Pod injected through the API server', async () => (sidecar(await create(ns.enabled, plainPod(`warmup-${++probes}`), 'All')) === 'none' ? undefined : true), 30_000, 200);
  });
  after(async () => {
    await optIn?.stop();
    await injector?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), Object.values(ns));
  });

  it('with the chart\'s defaults, one call per injected Pod (Pods and a Deployment\'s replicas); the stored sidecar mounts the Pod\'s token volume as the API server would', async () => {
    const before = await webhookCalls(plane());
    const pods = 10;
    for (let i = 0; i < pods; i++) assert.notEqual(sidecar(await create(ns.enabled, plainPod(`pod-${i}`))), 'none');
    const optedIn = await create(ns.plain, plainPod('opted-in', { annotations: { [OPT_IN_ANNOTATION]: 'true' } }));
    assert.notEqual(sidecar(optedIn), 'none');
    const labels = { app: 'web' };
    await plane().kubeConfig.makeApiClient(AppsV1Api).createNamespacedDeployment({
      namespace: ns.enabled,
      body: { metadata: { name: 'web' }, spec: { replicas: 5, selector: { matchLabels: labels }, template: { metadata: { labels }, spec: { containers: [{ name: 'web', image: 'registry.example/web:1' }] } } } },
    });
    const replicas = await eventually('5 Pods of Deployment web', async () => {
      const list = await core().listNamespacedPod({ namespace: ns.enabled, labelSelector: 'app=web' });
      return list.items.length === 5 ? list.items : undefined;
    }, 30_000);
    const calls = callsBetween(before, await webhookCalls(plane()));
    assert.equal(countOf(calls, ENABLED_WEBHOOK), pods + replicas.length, `calls of ${ENABLED_WEBHOOK} for ${pods + replicas.length} Pods`);
    assert.equal(countOf(calls, OPTED_IN_WEBHOOK), 1, `calls of ${OPTED_IN_WEBHOOK} for 1 Pod`);
    assert.equal(countOf(calls, OTHER_WEBHOOK), 0, `${OTHER_WEBHOOK} is not called for a Pod injected before it`);
    for (const pod of [...replicas, optedIn]) {
      const volume = pod.spec?.volumes?.find((entry) => entry.name.startsWith('kube-api-access-'))?.name;
      assert.ok(volume !== undefined, 'the ServiceAccount plugin gave the Pod its token volume');
      for (const line of addedTokenMounts(pod)) assert.match(line, new RegExp(`: ${volume} readOnly=true$`), pod.metadata?.name);
    }
  });

  it('with the chart\'s defaults, an ordinary Pod costs one call of other-pods (a skip), and a Pod a second webhook after ours opts in is injected when other-pods is reinvoked: two calls', async () => {
    let calls = new Map<string, WebhookCalls>();
    const between = async (what: () => Promise<V1Pod>): Promise<V1Pod> => {
      const before = await webhookCalls(plane());
      const pod = await what();
      calls = callsBetween(before, await webhookCalls(plane()));
      return pod;
    };
    const ordinary = await between(() => create(ns.ordinary, plainPod('ordinary')));
    assert.equal(sidecar(ordinary), 'none', 'an ordinary Pod is not injected');
    assert.deepEqual([countOf(calls, ENABLED_WEBHOOK), countOf(calls, OPTED_IN_WEBHOOK), countOf(calls, OTHER_WEBHOOK)], [0, 0, 1], `calls of ${ENABLED_WEBHOOK}, ${OPTED_IN_WEBHOOK}, ${OTHER_WEBHOOK} for an ordinary Pod`);

    optIn = await startOptInWebhook(plane(), uniqueName('zz-opt-in'), { 'reinvocation-test': label });
    await eventually('the second webhook annotating Pods', async () => ((await create(ns.plain, plainPod(`probe-${++probes}`), 'All')).metadata?.annotations?.[OPT_IN_ANNOTATION] === 'true' ? true : undefined), 20_000, 200);
    const later = await between(() => create(ns.plain, plainPod('opted-in-later-default')));
    assert.equal(later.metadata?.annotations?.[OPT_IN_ANNOTATION], 'true', 'the second webhook annotated it');
    assert.notEqual(sidecar(later), 'none', 'injected after the second webhook opted it in');
    assert.equal(countOf(calls, OTHER_WEBHOOK), 2, `${OTHER_WEBHOOK}: skipped first (not opted in), injected when reinvoked`);
    assert.equal(countOf(calls, OPTED_IN_WEBHOOK), 0, 'never called for the first time in a reinvocation');
    assert.equal(countOf(calls, optIn.webhookName), 1, 'the second webhook (reinvocationPolicy Never) once');

    const optedIn = await between(() => create(ns.plain, plainPod('opted-in-at-creation', { annotations: { [OPT_IN_ANNOTATION]: 'true' } })));
    assert.notEqual(sidecar(optedIn), 'none');
    assert.deepEqual([countOf(calls, OPTED_IN_WEBHOOK), countOf(calls, OTHER_WEBHOOK)], [1, 0], `calls of ${OPTED_IN_WEBHOOK}, ${OTHER_WEBHOOK} for a Pod opted in at creation`);
    // The label our patch adds keeps other-pods (objectSelector) from evaluating its matchConditions on the
    // injected Pod, both after opted-in-pods in the first round and in the API server's rerun of the chain:
    // without it, not-injected came out false twice (two exclusions by the API server's own count).
    assert.equal(optedIn.metadata?.labels?.[InjectedLabel.key], InjectedLabel.value);
    assert.equal(calls.get(OTHER_WEBHOOK)?.excluded ?? 0, 0, `matchConditions of ${OTHER_WEBHOOK} evaluated (false) on the injected Pod`);
    const enabled = await between(() => create(ns.enabled, plainPod('enabled-with-other-pods')));
    assert.notEqual(sidecar(enabled), 'none');
    assert.deepEqual([countOf(calls, ENABLED_WEBHOOK), countOf(calls, OTHER_WEBHOOK)], [1, 0], `calls of ${ENABLED_WEBHOOK}, ${OTHER_WEBHOOK} for a Pod of an enabled namespace`);
  });

  it('with webhook.laterOptIn=false ordinary Pods never reach the injector, and a Pod the second webhook opts in is not injected', async () => {
    assert.ok(release !== undefined && optIn !== undefined);
    await helmInstall(plane(), release, { webhook: { laterOptIn: false } }, { upgrade: true });
    await eventually('the upgraded webhook configuration without other-pods', async () => (sidecar(await create(ns.plain, plainPod(`probe-${++probes}`), 'All')) === 'none' ? true : undefined), 20_000, 200);
    const before = await webhookCalls(plane());
    const later = await create(ns.plain, plainPod('opted-in-later-off'));
    const ordinary = await create(ns.ordinary, plainPod('ordinary-off'));
    const calls = callsBetween(before, await webhookCalls(plane()));
    assert.equal(later.metadata?.annotations?.[OPT_IN_ANNOTATION], 'true', 'the second webhook annotated it');
    assert.equal(sidecar(later), 'none', 'the API server never calls a webhook for the first time in a reinvocation');
    assert.equal(sidecar(ordinary), 'none');
    assert.deepEqual([countOf(calls, ENABLED_WEBHOOK), countOf(calls, OPTED_IN_WEBHOOK), countOf(calls, OTHER_WEBHOOK)], [0, 0, 0], `calls of ${ENABLED_WEBHOOK}, ${OPTED_IN_WEBHOOK}, ${OTHER_WEBHOOK} for both Pods`);
    assert.equal(countOf(calls, optIn.webhookName), 1, 'the second webhook, for the Pod of its namespace');
  });

  it('with webhook.matchConditions=false the injector sees every Pod first, is reinvoked (IfNeeded) after the opt-in and injects: two calls for that Pod', async () => {
    assert.ok(release !== undefined && optIn !== undefined);
    await helmInstall(plane(), release, { webhook: { matchConditions: false } }, { upgrade: true });
    await eventually('the upgraded webhook to inject a Pod opted in by the second webhook', async () => (sidecar(await create(ns.plain, plainPod(`probe-${++probes}`), 'All')) === 'none' ? undefined : true), 20_000, 200);
    const before = await webhookCalls(plane());
    const pod = await create(ns.plain, plainPod('opted-in-later'));
    assert.equal(pod.metadata?.annotations?.[OPT_IN_ANNOTATION], 'true');
    assert.notEqual(sidecar(pod), 'none', 'injected after the second webhook opted it in');
    const calls = callsBetween(before, await webhookCalls(plane()));
    assert.equal(countOf(calls, OPTED_IN_WEBHOOK), 2, 'skipped first (not opted in), injected when reinvoked');
    assert.equal(countOf(calls, OTHER_WEBHOOK), 0, 'no other-pods without matchConditions');
    assert.equal(countOf(calls, optIn.webhookName), 1, 'the second webhook (reinvocationPolicy Never) once');
    const plain = await create(ns.enabled, plainPod('plain-after-upgrade'));
    assert.notEqual(sidecar(plain), 'none');
  });
});
