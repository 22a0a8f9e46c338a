import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { ApiextensionsV1Api, KubernetesObjectApi, type KubernetesObject, type V1CustomResourceDefinition } from '@kubernetes/client-node';
import { parseYamlDocuments } from '../../src/injection/index.js';
import { ROOT } from '../helpers/fixtures.js';
import { MONITORING_ON } from '../helpers/monitoring.js';
import { forEachKubeVersion } from './control-plane.js';
import { apiError, eventually, helmInstall, helmUninstall, readBack, uniqueName, type Release } from './cluster.js';

const CRDS = parseYamlDocuments(readFileSync(join(ROOT, 'test', 'e2e', 'monitoring-crds.yaml'), 'utf8')) as V1CustomResourceDefinition[];

/** The chart's ServiceMonitor, PrometheusRule and dashboard ConfigMap, installed by helm where the two CRDs exist. */
forEachKubeVersion('the monitoring objects on a real API server, with the Prometheus Operator CRDs', (plane) => {
  let release: Release | undefined;
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
});
