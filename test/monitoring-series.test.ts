import assert from 'node:assert/strict';
import { get } from 'node:http';
import { Readable } from 'node:stream';
import { after, before, describe, it } from 'node:test';
import { parseServeArgs } from '../src/commands/serve.js';
import { startPolicyController, type RunningPolicyController } from '../src/commands/policy-controller.js';
import { CniAgentMetrics } from '../src/node/agent-metrics.js';
import { startMetricsServer } from '../src/server/metrics-server.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { httpsCall } from './helpers/https-client.js';
import { NAMESPACE, startHarness, until, type Harness } from './helpers/injector-harness.js';
import { alertRules, dashboardQueries, injectorSeries, renderMonitoring } from './helpers/monitoring.js';
import { cniAgentMetrics, injectorMetrics, seriesNames } from './helpers/metrics-reference.js';
import { captureLog } from './helpers/server.js';

/**
 * Every envoy_injector_* series an alert or a dashboard panel reads is one a
 * running injector exports: a renamed metric cannot leave a dead alert. The
 * injector runs as in a cluster, against a fake API server: webhook mode
 * with --cert-mode auto (which adds the caBundle gauge) and policy mode
 * (the policy gauge); their live /metrics together are the exported set.
 */

const TEMPLATE = { metadata: { name: 'envoy-initializer', namespace: NAMESPACE }, data: { config: 'containers: [{name: envoy, image: "e:1"}]' } };
const WEBHOOKS = {
  metadata: { name: 'envoy-injector' },
  webhooks: [{ name: 'enabled-namespaces.envoy-injector.io', clientConfig: { service: { name: 'envoy-injector', namespace: NAMESPACE, path: '/mutate', port: 443 } }, admissionReviewVersions: ['v1'], sideEffects: 'None' }],
};

/** Metric names a text exposition declares (# TYPE), histograms with their _bucket, _sum and _count series. */
function exportedSeries(exposition: string): Set<string> {
  const names = new Set<string>();
  for (const match of exposition.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    const [, name = '', type] = match;
    names.add(name);
    if (type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(name + suffix);
  }
  return names;
}

function plainGet(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    get(url, (response) => {
      let body = '';
      response.on('data', (chunk: Buffer) => (body += chunk.toString()));
      response.on('end', () => (response.statusCode === 200 ? resolve(body) : reject(new Error(`${url}: ${response.statusCode}`))));
    }).on('error', reject);
  });
}

describe('the series the alerts and the dashboard read exist in a live /metrics', () => {
  let fake: FakeApiServer;
  let harness: Harness | undefined;
  let policy: RunningPolicyController | undefined;
  let agentMetrics: Awaited<ReturnType<typeof startMetricsServer>> | undefined;
  const exported = new Set<string>();

  before(async () => {
    fake = await FakeApiServer.start();
    fake.apply('namespaces', { metadata: { name: NAMESPACE } });
    fake.apply('configmaps', TEMPLATE);
    fake.apply('mutatingwebhookconfigurations', WEBHOOKS);
    harness = await startHarness(fake, ['--cert-mode', 'auto', '--cert-secret', 'envoy-injector-tls', '--webhook-config', 'envoy-injector', '--service-name', 'envoy-injector']);
    const webhook = harness;
    await until('the injector ready', async () => ((await httpsCall(`${webhook.url}/readyz`, { ca: '', extra: { rejectUnauthorized: false } })).status === 200 ? true : undefined));
    const settings = parseServeArgs(['--mode', 'policy', '--kubeconfig', fake.writeKubeconfig(), '--namespace', NAMESPACE, '--host', '127.0.0.1', '--port', '0'], {});
    assert.ok(settings !== undefined);
    const io = { stdin: Readable.from([]), stdout: { write: () => true }, stderr: { write: () => true } };
    policy = await startPolicyController(settings, { io, env: {}, log: captureLog().logger, backoff: { initialMs: 20, maxMs: 200 } });

    const overHttps = await httpsCall(`${webhook.url}/metrics`, { ca: '', extra: { rejectUnauthorized: false } });
    assert.equal(overHttps.status, 200);
    for (const name of exportedSeries(overHttps.body)) exported.add(name);
    for (const name of exportedSeries(await plainGet(`http://127.0.0.1:${policy.health.port}/metrics`))) exported.add(name);
    // The CNI agent's series, from its own metrics server (the alerts of capture in CNI mode read them).
    agentMetrics = await startMetricsServer(new CniAgentMetrics(), '127.0.0.1', 0);
    for (const name of exportedSeries(await plainGet(`http://127.0.0.1:${agentMetrics.port}/metrics`))) exported.add(name);
  });
  after(async () => {
    await harness?.injector.stop();
    await policy?.stop();
    await agentMetrics?.close();
    await fake.close();
  });

  it('the scrape is a real one: it holds the injector metrics of both modes', () => {
    for (const name of ['envoy_injector_admission_requests_total', 'envoy_injector_ca_bundle_trusted', 'envoy_injector_policy_in_sync', 'process_cpu_seconds_total']) {
      assert.ok(exported.has(name), `${name} exported`);
    }
    assert.ok(!exported.has('envoy_injector_no_such_metric'));
  });

  it('every envoy_injector_* series of every alert (webhook, policy and CNI mode) and every dashboard query is exported', async () => {
    const named = new Map<string, string>();
    for (const mode of ['webhook', 'policy', 'cni'] as const) {
      const manifests = await renderMonitoring(mode);
      for (const rule of alertRules(manifests)) for (const series of injectorSeries(rule.expr)) named.set(series, `alert ${rule.alert}`);
      for (const query of dashboardQueries(manifests)) for (const series of injectorSeries(query.expr)) named.set(series, `panel "${query.panel}"`);
    }
    assert.ok(named.size >= 8, `only ${named.size} series named`);
    const dead = [...named].filter(([series]) => !exported.has(series)).map(([series, where]) => `${series} (${where})`);
    assert.deepEqual(dead, [], 'series no running injector exports');
  });

  it('the metrics reference (docs/reference/metrics.md) names exactly the envoy_injector_* series both modes and the CNI agent export', () => {
    const live = [...exported].filter((name) => name.startsWith('envoy_injector_')).sort();
    assert.deepEqual([...seriesNames([...injectorMetrics(), ...cniAgentMetrics()])].sort(), live);
  });
});
