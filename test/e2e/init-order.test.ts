import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, plainPod, sidecar, uniqueName, type Release } from './cluster.js';
import { forEachKubeVersion } from './control-plane.js';
import { startChartInjector, type ChartInjector } from './injector-process.js';
import { startOptInWebhook, type OptInWebhook, type Review } from './opt-in-webhook.js';

/**
 * Another injector after ours (docs/design.md §14): a second webhook, whose
 * configuration sorts after the chart's, puts an init container of its own
 * where it breaks our order: before ours (a prepend, as Vault's
 * agent-init-first does), or after envoy-init (an append). The API server
 * reinvokes the chart's webhook that injected the Pod (IfNeeded), and the
 * injector puts its containers back: native, envoy-init and the proxy first;
 * classic, envoy-init last.
 */

const OTHER = { name: 'other-agent-init', image: 'registry.example/agent:1' };
const names = (pod: V1Pod): string[] => (pod.spec?.initContainers ?? []).map((container) => container.name);

/** Prepends OTHER to a native Pod's init containers, appends it to a classic one's; nothing when it is there. */
function breakOrder(review: Review): readonly object[] | undefined {
  const list = review.request?.object?.spec?.initContainers;
  if (list?.some((container) => container.name === OTHER.name)) return undefined;
  const native = review.request?.object?.metadata?.annotations?.['envoy-injector.io/native-sidecar'] === 'true';
  if (list === undefined) return [{ op: 'add', path: '/spec/initContainers', value: [OTHER] }];
  return [{ op: 'add', path: native ? '/spec/initContainers/0' : '/spec/initContainers/-', value: OTHER }];
}

forEachKubeVersion('the order of init containers after another injector (webhook mode)', (plane, version) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  let other: OptInWebhook | undefined;
  const label = uniqueName('order');
  const namespace = uniqueName('order');
  const core = () => plane().kubeConfig.makeApiClient(CoreV1Api);
  let probes = 0;

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('mesh'), namespace: uniqueName('mesh-system') });
    await createNamespace(plane(), namespace, { 'envoy-injector.io/inject': 'enabled', 'order-test': label });
    injector = await startChartInjector(plane(), release);
    other = await startOptInWebhook(plane(), uniqueName('zz-other'), { 'order-test': label }, breakOrder);
    await eventually('a Pod injected, and the second webhook adding its init container', async () => {
      const pod = await core().createNamespacedPod({ namespace, body: plainPod(`probe-${++probes}`), dryRun: 'All' });
      return sidecar(pod) !== 'none' && names(pod).includes(OTHER.name) ? true : undefined;
    }, 30_000, 200);
  });
  after(async () => {
    await other?.stop();
    await injector?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), [namespace]);
  });

  it('classic with capture: an init container appended after envoy-init is put before it', async () => {
    const pod = await core().createNamespacedPod({ namespace, body: plainPod('classic', { annotations: { 'envoy-injector.io/native-sidecar': 'false', 'envoy-injector.io/capture': 'true' } }) });
    assert.equal(sidecar(pod), 'classic');
    assert.deepEqual(names(pod), [OTHER.name, 'envoy-init']);
  });

  if (version === '1.28') return; // no native sidecars by default

  it('native with capture: an init container prepended before ours is put after envoy-init and the proxy', async () => {
    const pod = await core().createNamespacedPod({
      namespace,
      body: { ...plainPod('native', { annotations: { 'envoy-injector.io/native-sidecar': 'true', 'envoy-injector.io/capture': 'true' } }), spec: { initContainers: [{ name: 'migrate', image: 'registry.example/migrate:1' }], containers: [{ name: 'app', image: 'registry.example/app:1' }] } },
    });
    assert.deepEqual(names(pod), ['envoy-init', 'envoy', OTHER.name, 'migrate']);
  });

  it('native without capture: the proxy is put back first', async () => {
    const pod = await core().createNamespacedPod({ namespace, body: plainPod('native-plain', { annotations: { 'envoy-injector.io/native-sidecar': 'true' } }) });
    assert.deepEqual(names(pod), ['envoy', OTHER.name]);
  });
});
