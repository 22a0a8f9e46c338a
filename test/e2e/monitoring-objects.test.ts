import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { ApiextensionsV1Api, CoreV1Api, KubernetesObjectApi, type KubernetesObject, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { parseYamlDocuments } from '../../src/injection/index.js';
import { ROOT } from '../helpers/fixtures.js';
import { httpsCall } from '../helpers/https-client.js';
import { MONITORING_ON, scrapedService } from '../helpers/monitoring.js';
import { forEachKubeVersion } from './control-plane.js';
import { apiError, eventually, helmInstall, helmUninstall, readBack, uniqueName, type Release } from './cluster.js';
import { startChartInjector, type ChartInjector } from './injector-process.js';

const CRDS = parseYamlDocuments(readFileSync(join(ROOT, 'test', 'e2e', 'monitoring-crds.yaml'), 'utf8')) as V1CustomResourceDefinition[];

/** The chart's ServiceMonitor, PrometheusRule and dashboard ConfigMap, installed by helm where the two CRDs exist. */
forEachKubeVersion('the monitoring objects on a real API server, with the Prometheus Operator CRDs', (plane) => {
  let release: Release | undefined;
  let injector: ChartInjector | undefined;
  before(async () => {
    const extensions = plane().kubeConfig.makeApiClient(ApiextensionsV1Api);
    for (const crd of CRDS) {
      await extensions.createCustomResourceDefinition({ body: crd }).catch((error: unknown) => {
        if (apiError(error).code !== 409) throw error; // another file, or an earlier run on this cluster, made it
      });
      await eventually(`CRD ${crd.metadata?.name} established`, async () => {
        const stored = await extensions.readCustomResourceDefinition({ name: crd.metadata?.name ?? '' });
        return stored.status?.conditions?.some((condition) => condition.type === 'Established' && condition.status === 'True') ? true : undefined;
      });
    }
  });
  after(async () => {
    await injector?.stop().catch(() => undefined);
    if (release !== undefined) await helmUninstall(plane(), release);
  });

  it('helm install with the three values: the API server stores the ServiceMonitor, the PrometheusRule and the dashboard ConfigMap', async () => {
    release = await helmInstall(plane(), { name: uniqueName('monitoring'), namespace: uniqueName('monitoring-system') }, { metrics: MONITORING_ON });
    const chosen = release.manifests.filter((manifest) => ['ServiceMonitor', 'PrometheusRule'].includes(manifest.kind) || manifest.metadata.labels?.['grafana_dashboard'] === '1');
    assert.deepEqual(chosen.map((manifest) => manifest.kind).sort(), ['ConfigMap', 'PrometheusRule', 'ServiceMonitor']);
    for (const manifest of chosen) {
      const stored = await readBack(plane(), { ...manifest, metadata: { ...manifest.metadata, namespace: release.namespace } });
      assert.ok(stored !== undefined, `${manifest.kind} ${manifest.metadata.name} stored`);
      // Pruning would drop fields the schema does not know: what is stored is what was rendered.
      const { metadata: _rendered, ...renderedBody } = manifest;
      const { metadata: _stored, ...storedBody } = stored as KubernetesObject & Record<string, unknown>;
      assert.deepEqual(storedBody, renderedBody, `${manifest.kind}: stored as rendered`);
    }
  });

  it('the CRDs really validate: a PrometheusRule whose rule has no expr is refused', async () => {
    assert.ok(release !== undefined);
    const client = KubernetesObjectApi.makeApiClient(plane().kubeConfig);
    const bad = { apiVersion: 'monitoring.coreos.com/v1', kind: 'PrometheusRule', metadata: { name: 'bad', namespace: release.namespace }, spec: { groups: [{ name: 'g', rules: [{ alert: 'NoExpr' }] }] } };
    const refused = await client.create(bad).then(() => undefined, (error: unknown) => apiError(error));
    assert.ok(refused !== undefined, 'accepted a rule without expr');
    assert.equal(refused.code, 422);
    assert.match(refused.message, /expr: Required value/);
  });

  it('a scrape as the ServiceMonitor describes it (Service port, serverName, the Secret\'s ca.crt) gets the injector\'s metrics', async () => {
    assert.ok(release !== undefined);
    const installed = release;
    injector = await startChartInjector(plane(), installed);
    const { service, port, endpoint } = scrapedService(installed.manifests);
    const tls = endpoint['tlsConfig'] as { serverName: string; ca: { secret: { name: string; key: string } } };
    const core = plane().kubeConfig.makeApiClient(CoreV1Api);
    const live = await core.readNamespacedService({ name: service.metadata.name, namespace: installed.namespace });
    const servicePort = live.spec?.ports?.find((candidate) => candidate.name === port.name);
    assert.ok(servicePort !== undefined && live.spec?.clusterIP !== undefined, `Service ${service.metadata.name} has port ${port.name}`);
    const url = `${String(endpoint['scheme'])}://${live.spec.clusterIP}:${servicePort.port}${String(endpoint['path'])}`;
    // What the Prometheus Operator gives Prometheus: only that CA, verifying that name (the Secret appears once the injector runs).
    const metrics = await eventually(`a verified scrape of ${url}`, async () => {
      const secret = await core.readNamespacedSecret({ name: tls.ca.secret.name, namespace: installed.namespace });
      const ca = Buffer.from(secret.data?.[tls.ca.secret.key] ?? '', 'base64').toString('utf8');
      const answer = await httpsCall(url, { ca, extra: { servername: tls.serverName } });
      return answer.status === 200 ? answer.body : undefined;
    }, 30_000);
    // Every series carries the release's label (the chart's METRICS_RELEASE): what its alerts select, whatever the scrape.
    assert.ok(metrics.split('\n').some((line) => line.startsWith(`envoy_injector_certificate_expiry_timestamp_seconds{envoy_injector_release="${installed.namespace}/${installed.name}"} `)), metrics.slice(0, 2000));
    assert.match(metrics, /^# TYPE envoy_injector_admission_requests_total counter$/m);
  });
});
