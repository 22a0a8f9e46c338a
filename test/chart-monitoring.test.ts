import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CHART_DIR, helm, KUBE_VERSION, NAMESPACE, only, RELEASE, renderChart, valuesArgs, type Manifest } from './helpers/helm.js';
import { alertRules, dashboardQueries, injectorSeries, renderedDashboard, renderMonitoring, RUNBOOK_PATH, runbookSections, scrapedService } from './helpers/monitoring.js';
import { REPOSITORY } from './helpers/docs-links.js';

/** metrics.serviceMonitor / prometheusRule / dashboards, as helm renders them. */

const MONITORING_KINDS = ['ServiceMonitor', 'PrometheusRule'];
const isDashboard = (manifest: Manifest): boolean => manifest.kind === 'ConfigMap' && manifest.metadata.labels?.['grafana_dashboard'] === '1';

function containerPorts(manifests: readonly Manifest[]): { name: string; containerPort: number }[] {
  const pod = (only(manifests, 'Deployment')['spec'] as { template: { spec: { containers: { name: string; ports?: { name: string; containerPort: number }[] }[] } } }).template.spec;
  return pod.containers.find((container) => container.name === 'envoy-injector')?.ports ?? [];
}

describe('chart: the monitoring objects', () => {
  it('renders none of them by default (their CRDs may be absent)', async () => {
    for (const manifests of [await renderChart(), await renderMonitoring('policy', { metrics: { serviceMonitor: { enabled: false }, prometheusRule: { enabled: false }, dashboards: { enabled: false } } })]) {
      assert.deepEqual(manifests.filter((manifest) => MONITORING_KINDS.includes(manifest.kind) || isDashboard(manifest)), []);
    }
    const service = only(await renderChart(), 'Service');
    assert.deepEqual((service['spec'] as { ports: { name: string }[] }).ports.map((port) => port.name), ['https'], 'no metrics port without metrics.port');
  });

  it('renders the three objects when asked, with the labels and annotations given', async () => {
    const manifests = await renderMonitoring('webhook', {
      metrics: {
        serviceMonitor: { enabled: true, interval: '15s', scrapeTimeout: '10s', labels: { release: 'kube-prometheus-stack' } },
        prometheusRule: { enabled: true, labels: { release: 'kube-prometheus-stack' } },
        dashboards: { enabled: true, labels: { team: 'platform' }, annotations: { grafana_folder: 'Platform' } },
      },
    });
    const monitor = only(manifests, 'ServiceMonitor');
    const rule = only(manifests, 'PrometheusRule');
    const dashboards = manifests.filter(isDashboard);
    assert.equal(monitor.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(rule.apiVersion, 'monitoring.coreos.com/v1');
    assert.equal(monitor.metadata.labels?.['release'], 'kube-prometheus-stack');
    assert.equal(rule.metadata.labels?.['release'], 'kube-prometheus-stack');
    assert.equal(dashboards.length, 1);
    assert.equal(dashboards[0]?.metadata.labels?.['team'], 'platform');
    assert.equal(dashboards[0]?.metadata.annotations?.['grafana_folder'], 'Platform');
    for (const manifest of [monitor, rule, ...dashboards]) assert.equal(manifest.metadata.namespace, NAMESPACE);
    const { endpoint } = scrapedService(manifests);
    assert.equal(endpoint['interval'], '15s');
    assert.equal(endpoint['scrapeTimeout'], '10s');
  });

  it('auto mode: scrapes the Service port https, verifying the serving certificate with the CA of the TLS Secret', async () => {
    const manifests = await renderMonitoring('webhook');
    const { service, port, endpoint } = scrapedService(manifests);
    assert.equal(port.name, 'https');
    assert.equal(endpoint['scheme'], 'https');
    assert.equal(endpoint['path'], '/metrics');
    const tls = endpoint['tlsConfig'] as { serverName: string; ca: { secret: { name: string; key: string } } };
    assert.equal(tls.serverName, `${service.metadata.name}.${NAMESPACE}.svc`, 'a name the serving certificate holds');
    const env = ((only(manifests, 'Deployment')['spec'] as { template: { spec: { containers: { env: { name: string; value?: string }[] }[] } } }).template.spec.containers[0]?.env ?? []);
    assert.equal(tls.ca.secret.name, env.find((variable) => variable.name === 'CERT_SECRET')?.value, 'the Secret the injector keeps its CA in');
    assert.equal(tls.ca.secret.key, 'ca.crt');
  });

  it('metrics.port: the Service gains port metrics, to the container port of that name, and the ServiceMonitor scrapes it over HTTP', async () => {
    const manifests = await renderMonitoring('webhook', { metrics: { port: 9090 } });
    const { port, endpoint } = scrapedService(manifests);
    assert.deepEqual({ name: port.name, port: port.port, targetPort: (port as { targetPort?: string }).targetPort }, { name: 'metrics', port: 9090, targetPort: 'metrics' });
    assert.ok(containerPorts(manifests).some((container) => container.name === 'metrics' && container.containerPort === 9090));
    assert.equal(endpoint['scheme'], undefined);
    assert.equal(endpoint['tlsConfig'], undefined);
  });

  it('policy mode: a metrics Service of its own, port http to the container port of that name', async () => {
    const manifests = await renderMonitoring('policy');
    const { service, port } = scrapedService(manifests);
    assert.equal(service.metadata.name, `${RELEASE}-envoy-injector-metrics`);
    assert.equal((port as { targetPort?: string }).targetPort, 'http');
    assert.ok(containerPorts(manifests).some((container) => container.name === 'http' && container.containerPort === port.port));
  });

  it("the rules select the release by the label its injector puts on every series (not the scrape's job), and link each alert to its own section of the runbook", async () => {
    const sections = runbookSections();
    const alerts = new Set<string>();
    for (const mode of ['webhook', 'policy', 'cni'] as const) {
      const manifests = await renderMonitoring(mode);
      const env = ((only(manifests, 'Deployment')['spec'] as { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } }).template.spec.containers[0]?.env ?? []);
      assert.equal(env.find((entry) => entry.name === 'METRICS_RELEASE')?.value, `${NAMESPACE}/${RELEASE}`);
      for (const rule of alertRules(manifests)) {
        for (const series of injectorSeries(rule.expr)) {
          const selectors = [...rule.expr.matchAll(new RegExp(`${series}\\{([^}]*)\\}`, 'g'))].map((match) => match[1] ?? '');
          assert.ok(selectors.length > 0, `${rule.alert}: ${series} without selector`);
          for (const selector of selectors) assert.equal(selector.trim(), `envoy_injector_release="${NAMESPACE}/${RELEASE}"${selector.includes(',') ? selector.slice(selector.indexOf(',')) : ''}`, `${rule.alert}: ${series}{${selector}}`);
        }
        assert.doesNotMatch(rule.expr, /\bjob=|\bup\{/, `${rule.alert}: reads the scrape's own labels`);
        const alert = rule.alert ?? '';
        alerts.add(alert);
        // The default runbookBaseUrl is the runbook's page in the repository; the anchor is the alert's section.
        assert.equal(rule.annotations?.['runbook_url'], `${REPOSITORY}/blob/main/${RUNBOOK_PATH}#${sections.get(alert) ?? '(no section)'}`, `${rule.alert}: runbook_url`);
      }
    }
    assert.deepEqual([...sections.keys()].sort(), [...alerts].sort(), `${RUNBOOK_PATH} has one section per alert, and none other`);
  });

  it('runbookBaseUrl moves every runbook_url to the team\'s own copy', async () => {
    const manifests = await renderMonitoring('webhook', { metrics: { prometheusRule: { enabled: true, runbookBaseUrl: 'https://wiki.example.com/envoy-injector/runbook' } } });
    for (const rule of alertRules(manifests)) assert.equal(rule.annotations?.['runbook_url'], `https://wiki.example.com/envoy-injector/runbook#${(rule.alert ?? '').toLowerCase()}`);
  });

  it('EnvoyInjectorWorkloadEventsDropped only where Events are posted: webhook mode with events.queueSize above 0', async () => {
    const named = async (mode: 'webhook' | 'policy', values: Record<string, unknown> = {}) => alertRules(await renderMonitoring(mode, values)).some((rule) => rule.alert === 'EnvoyInjectorWorkloadEventsDropped');
    assert.deepEqual([await named('webhook'), await named('webhook', { events: { queueSize: 0 } }), await named('policy')], [true, false, false]);
  });

  it('additionalRules are appended to the chart group', async () => {
    const extra = { alert: 'MyOwn', expr: 'vector(1)', labels: { severity: 'info' } };
    const manifests = await renderMonitoring('webhook', { metrics: { prometheusRule: { enabled: true, additionalRules: [extra] } } });
    assert.deepEqual(alertRules(manifests).at(-1), extra);
  });

  it('the dashboard: at least six panels, variables for the data source and the release, every query of ours filtered by it (two releases in one namespace stay apart)', async () => {
    const manifests = await renderMonitoring('webhook');
    const dashboard = renderedDashboard(manifests);
    assert.ok(dashboard.panels.length >= 6, `${dashboard.panels.length} panels`);
    const variables = Object.fromEntries(dashboard.templating.list.map((variable) => [variable.name, variable.type]));
    assert.deepEqual(variables, { datasource: 'datasource', release: 'query' });
    for (const panel of dashboard.panels as unknown as { title: string; datasource: { uid: string } }[]) assert.equal(panel.datasource.uid, '${datasource}', panel.title);
    for (const { panel, expr } of dashboardQueries(manifests)) {
      for (const series of injectorSeries(expr)) {
        for (const match of expr.matchAll(new RegExp(`${series}\\{([^}]*)\\}`, 'g'))) assert.match(match[1] ?? '', /envoy_injector_release="\$release"/, `${panel}: ${series}`);
      }
    }
  });

  it('values.schema.json rejects a bad duration and an unknown key under metrics', async () => {
    const wrong: [Record<string, unknown>, RegExp][] = [
      [{ metrics: { serviceMonitor: { enabled: true, interval: '30 seconds' } } }, /at '\/metrics\/serviceMonitor\/interval': '30 seconds' does not match pattern/],
      [{ metrics: { prometheusRule: { enable: true } } }, /additional properties 'enable' not allowed/],
      [{ metrics: { dashboards: { labels: { team: 3 } } } }, /at '\/metrics\/dashboards\/labels\/team': got number, want string/],
    ];
    for (const [values, message] of wrong) {
      const result = await helm(['template', RELEASE, CHART_DIR, '--kube-version', KUBE_VERSION, ...(await valuesArgs(values))]);
      assert.notEqual(result.code, 0, JSON.stringify(values));
      assert.match(result.stderr, message);
    }
  });
});
