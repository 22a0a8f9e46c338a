import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { AppsV1Api, CoreV1Api, EventsV1Api, type EventsV1Event } from '@kubernetes/client-node';
import { httpsCall } from '../helpers/https-client.js';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, plainPod, sidecar, uniqueName, type Release } from './cluster.js';
import { forbiddenLines, startChartInjector, type ChartInjector } from './injector-process.js';
import { metricSample } from '../helpers/metric-sample.js';

/**
 * Warning Events on workloads (issue 28, item 3), with the chart's RBAC: the
 * injector runs as the chart's ServiceAccount, so a permission missing would
 * show as a 403 in its log and no Event.
 */
forEachKubeVersion('Warning Events on the workload of Pods that asked for an unknown template', (plane) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  const namespace = uniqueName('events');
  const apps = () => plane().kubeConfig.makeApiClient(AppsV1Api);
  const ours = async (): Promise<EventsV1Event[]> => {
    const list = await plane().kubeConfig.makeApiClient(EventsV1Api).listNamespacedEvent({ namespace });
    return list.items.filter((event) => event.reportingController === 'envoy-injector.io/injector');
  };
  const countOf = (event: EventsV1Event): number => event.series?.count ?? 1;

  before(async () => {
    release = await helmInstall(plane(), { name: uniqueName('mesh'), namespace: uniqueName('mesh-system') });
    await createNamespace(plane(), namespace, { 'envoy-injector.io/inject': 'enabled' });
    injector = await startChartInjector(plane(), release);
    const core = plane().kubeConfig.makeApiClient(CoreV1Api);
    await eventually('a first Pod injected through the API server', async () => {
      const pod = await core.createNamespacedPod({ namespace, body: plainPod(uniqueName('warmup')), dryRun: 'All' });
      return sidecar(pod) === 'none' ? undefined : true;
    }, 30_000, 200);
  });
  after(async () => {
    await injector?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), [namespace]);
  });

  it('a Deployment whose Pods name an unknown template: one Warning Event on it, naming the template, its count growing with the replicas', async () => {
    const labels = { app: 'shop' };
    const template = { metadata: { labels, annotations: { 'envoy-injector.io/template': 'canary-v2' } }, spec: { containers: [{ name: 'shop', image: 'registry.example/shop:1' }] } };
    const created = await apps().createNamespacedDeployment({ namespace, body: { metadata: { name: 'shop' }, spec: { replicas: 2, selector: { matchLabels: labels }, template } } });

    const first = await eventually('a Warning Event on Deployment shop counting its 2 Pods', async () => {
      const events = await ours();
      return events.length === 1 && countOf(events[0] as EventsV1Event) === 2 ? (events[0] as EventsV1Event) : undefined;
    }, 30_000, 200);
    assert.equal(first.type, 'Warning');
    assert.equal(first.reason, 'UnknownTemplate');
    assert.equal(first.action, 'InjectSidecar');
    assert.match(first.note ?? '', /no template named "canary-v2"/);
    assert.deepEqual(
      { kind: first.regarding?.kind, apiVersion: first.regarding?.apiVersion, name: first.regarding?.name, namespace: first.regarding?.namespace, uid: first.regarding?.uid },
      { kind: 'Deployment', apiVersion: 'apps/v1', name: 'shop', namespace, uid: created.metadata?.uid },
      'the Event regards the Deployment (not its ReplicaSet), by uid, as `kubectl describe deployment` finds it',
    );

    await apps().patchNamespacedDeployment({ name: 'shop', namespace, body: [{ op: 'replace', path: '/spec/replicas', value: 5 }] });
    const grown = await eventually('the Event\'s series to count 5 Pods', async () => {
      const events = await ours();
      return events.length === 1 && countOf(events[0] as EventsV1Event) === 5 ? (events[0] as EventsV1Event) : undefined;
    }, 30_000, 200);
    assert.equal(grown.metadata?.name, first.metadata?.name, 'the same Event, its series grown');
    assert.ok(grown.series?.lastObservedTime !== undefined);

    const pods = await plane().kubeConfig.makeApiClient(CoreV1Api).listNamespacedPod({ namespace, labelSelector: 'app=shop' });
    assert.equal(pods.items.length, 5);
    for (const pod of pods.items) assert.equal(sidecar(pod), 'none', `${pod.metadata?.name} was let through uninjected`);
  });

  it('the chart\'s RBAC was enough: no 403 in the injector\'s log, no Event write failed', async () => {
    assert.ok(injector !== undefined);
    assert.deepEqual(forbiddenLines(injector), []);
    const metrics = await fetchMetrics(injector);
    assert.ok((metricSample(metrics, 'envoy_injector_workload_event_writes_total', { result: 'created' }) ?? 0) > 0, 'Event writes counted at all');
    assert.equal(metricSample(metrics, 'envoy_injector_workload_event_writes_total', { result: 'failed' }) ?? 0, 0);
    assert.equal(metricSample(metrics, 'envoy_injector_workload_events_dropped_total'), 0);
  });
});

/** The injector's metrics, as a scraper reads them where it listens (its certificate is not checked here). */
async function fetchMetrics(injector: ChartInjector): Promise<string> {
  const response = await httpsCall(`https://${injector.host}:${injector.port}/metrics`, { ca: '', extra: { rejectUnauthorized: false } });
  return response.body;
}
