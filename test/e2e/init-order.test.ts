import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import type { JsonObject } from '../../src/injection/index.js';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, plainPod, sidecar, uniqueName, type Release } from './cluster.js';
import { forEachKubeVersion, servedPolicyApiVersion } from './control-plane.js';
import { startChartInjector, type ChartInjector } from './injector-process.js';
import { startOptInWebhook, type OptInWebhook, type Review } from './opt-in-webhook.js';
import { isInjected, kubeCall, ParityRun, Path } from './policy-parity.js';

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
  // Ours first in the list: a native Pod (the proxy, or envoy-init before it); an append breaks a classic one.
  const native = list?.[0]?.name === 'envoy' || (list?.[0]?.name === 'envoy-init' && list[1]?.name === 'envoy');
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

forEachKubeVersion('the order of init containers after another injector (policy mode)', (plane, version) => {
  const apiVersion = servedPolicyApiVersion(version);
  if (apiVersion === undefined) return;
  let run: ParityRun | undefined;
  let other: OptInWebhook | undefined;
  before(async () => {
    run = new ParityRun(plane(), apiVersion);
    await run.start();
    // Policies run before webhooks: the second webhook changes the Pod after the policy, which the API server then reinvokes.
    other = await startOptInWebhook(plane(), uniqueName('zz-other'), { 'parity.envoy-injector.io/path': `policy-${run.id}` }, breakOrder);
    const current = run;
    await eventually('the second webhook adding its init container', async () => {
      const pod = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${current.namespaces.policy.enabled}/pods?dryRun=All`, plainPod('probe'));
      return JSON.stringify(pod.body).includes(OTHER.name) ? true : undefined;
    }, 30_000, 200);
  });
  after(async () => {
    await other?.stop();
    await run?.stop();
  });

  const create = async (name: string, annotations: Record<string, string>, initContainers: JsonObject[] = []): Promise<string[]> => {
    assert.ok(run !== undefined);
    const body = { apiVersion: 'v1', kind: 'Pod', metadata: { name, annotations }, spec: { ...(initContainers.length > 0 ? { initContainers } : {}), containers: [{ name: 'app', image: 'registry.example/app:1' }] } };
    const { stored } = await run.createIn(Path.policy, 'enabled', body, name);
    assert.ok(isInjected(stored), JSON.stringify(stored));
    return (((stored as { spec: { initContainers?: { name: string }[] } }).spec.initContainers) ?? []).map((container) => container.name);
  };

  it('classic with capture: an init container appended after envoy-init is put before it', async () => {
    assert.deepEqual(await create('classic', { 'envoy-injector.io/template': 'capture', 'envoy-injector.io/capture': 'true' }), [OTHER.name, 'envoy-init']);
  });

  it('native with capture: an init container prepended before ours is put after envoy-init and the proxy', async () => {
    const names = await create('native', { 'envoy-injector.io/template': 'capture-on', 'envoy-injector.io/native-sidecar': 'true' }, [{ name: 'migrate', image: 'registry.example/migrate:1' }]);
    assert.deepEqual(names, ['envoy-init', 'envoy', OTHER.name, 'migrate']);
  });
});
