import assert from 'node:assert/strict';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { formatYaml } from '../src/injection/index.js';
import { ADMISSION_REASONS, ErrorReason } from '../src/server/metrics.js';
import { casesOf, SKIPS_NOT_ALERTING, type AlertCase, type AlertVariant } from './fixtures/alert-cases.js';
import { NAMESPACE, only, renderChart, type Manifest } from './helpers/helm.js';
import { alertRules, dashboardQueries, MONITORING_ON, renderMonitoring, ruleFile, scrapedService, substituteVariables, type PromRule } from './helpers/monitoring.js';
import { promtool, promtoolOrSkip } from './helpers/promtool.js';

/**
 * The chart's alerts and dashboard queries, judged by promtool: `check rules`
 * parses every expression with Prometheus's own parser, `test rules` runs
 * each alert over input series and says when it fires, with which labels and
 * annotations (test/fixtures/alert-cases.ts).
 */
const VARIANTS: readonly AlertVariant[] = ['webhook', 'policy', 'cni'];

describe('the PrometheusRule and the dashboard, checked by promtool', () => {
  let work: string;
  const rendered = new Map<AlertVariant, Manifest[]>();
  before(async () => {
    work = await mkdtemp(join(tmpdir(), 'ei-promtool-'));
    for (const variant of VARIANTS) rendered.set(variant, await renderMonitoring(variant));
  });
  after(async () => {
    await rm(work, { recursive: true, force: true });
  });
  const manifests = (variant: AlertVariant): Manifest[] => {
    const found = rendered.get(variant);
    assert.ok(found !== undefined);
    return found;
  };

  const checkRules = async (bin: string, name: string, file: unknown) => {
    await writeFile(join(work, name), formatYaml(file));
    return promtool(bin, ['check', 'rules', name], work);
  };

  it('promtool check rules accepts the rendered PrometheusRule in every mode', async (t) => {
    const bin = promtoolOrSkip(t);
    if (bin === undefined) return;
    const variants: [string, Promise<Manifest[]>][] = [
      ['webhook, auto', Promise.resolve(manifests('webhook'))],
      ['webhook, certManager', renderMonitoring('webhook', { certificates: { mode: 'certManager' } })],
      ['webhook, metrics.port', renderMonitoring('webhook', { metrics: { port: 9090 } })],
      ['policy', Promise.resolve(manifests('policy'))],
      ['additionalRules', renderMonitoring('webhook', { metrics: { prometheusRule: { enabled: true, additionalRules: [{ alert: 'Mine', expr: 'vector(1)', labels: { severity: 'info' } }] } } })],
    ];
    for (const [index, [name, render]] of variants.entries()) {
      const result = await checkRules(bin, `rules-${index}.yaml`, ruleFile(await render));
      assert.equal(result.code, 0, `${name}: ${result.output}`);
      assert.match(result.output, /SUCCESS: \d+ rules found/, name);
    }
  });

  it('promtool check rules refuses a broken expression (the check can fail)', async (t) => {
    const bin = promtoolOrSkip(t);
    if (bin === undefined) return;
    const result = await checkRules(bin, 'broken.yaml', { groups: [{ name: 'g', rules: [{ record: 'r', expr: 'sum(rate(x[5m])' }] }] });
    assert.notEqual(result.code, 0, result.output);
  });

  it('every alert has severity, summary, description and a runbook_url', () => {
    for (const variant of VARIANTS) {
      for (const rule of alertRules(manifests(variant))) {
        assert.match(rule.labels?.['severity'] ?? '', /^(critical|warning|info)$/, `${rule.alert}: severity`);
        for (const key of ['summary', 'description', 'runbook_url']) assert.ok((rule.annotations?.[key] ?? '').length > 0, `${rule.alert}: ${key}`);
      }
    }
    assert.ok(alertRules(manifests('webhook')).length >= 5, 'at least five alerts');
  });

  it('every alert of every mode has a unit test, and every unit test an alert', () => {
    for (const variant of VARIANTS) {
      const alerts = new Set(alertRules(manifests(variant)).map((rule) => rule.alert));
      const tested = new Set(casesOf(variant).map((testCase) => testCase.alert));
      assert.deepEqual([...alerts].sort(), [...tested].sort(), `${variant} mode: alerts rendered vs alerts tested`);
    }
  });

  it('every skip reason the webhook can give is named by an alert, or listed as deliberately not alerting (not both)', () => {
    // The reasons an alert selects with reason=~"a|b" or reason="a".
    const named = new Set(
      alertRules(manifests('webhook')).flatMap((rule) => [...rule.expr.matchAll(/\breason=~?"([^"]+)"/g)].flatMap((match) => (match[1] ?? '').split('|'))),
    );
    const skips = ADMISSION_REASONS.skipped;
    assert.deepEqual(skips.filter((reason) => !named.has(reason) && !Object.hasOwn(SKIPS_NOT_ALERTING, reason)), [], 'skip reasons no alert names and none lists as deliberate');
    assert.deepEqual(skips.filter((reason) => named.has(reason) && Object.hasOwn(SKIPS_NOT_ALERTING, reason)), [], 'both named by an alert and listed as not alerting');
    const known = new Set<string>([...skips, ...Object.values(ErrorReason)]);
    assert.deepEqual([...named].filter((reason) => !known.has(reason)), [], 'an alert names a reason the webhook never gives');
    assert.deepEqual(Object.keys(SKIPS_NOT_ALERTING).filter((reason) => !skips.some((skip) => skip === reason)), [], 'listed as not alerting, but no skip reason');
    assert.ok(named.has('unknown_namespace_template') && named.has('status_copied'));
  });

  it("the CNI agents carry the injector's release label (the DaemonSet's METRICS_RELEASE), which their alerts select", () => {
    const chart = manifests('cni');
    assert.equal(metricsRelease(chart, 'DaemonSet'), releaseLabel(chart));
  });

  for (const variant of VARIANTS) {
    it(`promtool test rules: each alert of ${variant} mode quiet, then firing with its labels and annotations`, async (t) => {
      const bin = promtoolOrSkip(t);
      if (bin === undefined) return;
      const chart = manifests(variant);
      await writeFile(join(work, `${variant}-rules.yaml`), formatYaml(ruleFile(chart)));
      const job = scrapedService(chart).service.metadata.name;
      const rules = alertRules(chart);
      const cases = casesOf(variant);
      const tests = cases.map((testCase) => unitTest(testCase, rules, { JOB: job, NS: NAMESPACE, REL: releaseLabel(chart), HOOKS: webhookNameSuffix(chart) }));
      await writeFile(join(work, `${variant}-test.yaml`), formatYaml({ rule_files: [`${variant}-rules.yaml`], evaluation_interval: '1m', tests }));
      const result = await promtool(bin, ['test', 'rules', `${variant}-test.yaml`], work);
      assert.equal(result.code, 0, result.output);
      assert.match(result.output, /SUCCESS/);
      t.diagnostic(`${cases.length} cases over ${new Set(cases.map((testCase) => testCase.alert)).size} alerts`);
    });
  }

  it("two releases side by side, one scraped by its Pods' annotations: each release's alerts see only its own series and its own webhooks", async (t) => {
    const bin = promtoolOrSkip(t);
    if (bin === undefined) return;
    const a = manifests('webhook');
    const b = await renderChart({ metrics: MONITORING_ON }, { release: 'edge', namespace: 'edge-system' });
    await writeFile(join(work, 'a-rules.yaml'), formatYaml(ruleFile(a)));
    await writeFile(join(work, 'b-rules.yaml'), formatYaml(ruleFile(b)));
    const [relA, relB] = [releaseLabel(a), releaseLabel(b)];
    assert.notEqual(relA, relB);
    const webhook = (chart: Manifest[], purpose: string): string => {
      const names = (only(chart, 'MutatingWebhookConfiguration')['webhooks'] as { name: string }[]).map((entry) => entry.name);
      const name = names.find((candidate) => candidate.startsWith(`${purpose}.`));
      assert.ok(name !== undefined, `${purpose} in ${names.join(', ')}`);
      return name;
    };
    const [otherA, otherB] = [webhook(a, 'other-pods'), webhook(b, 'other-pods')];
    assert.notEqual(otherA, otherB, "each release's webhooks have names of their own: the API server's metrics tell them apart");
    // A runs, scraped by its Pods' prometheus.io annotations (a job of the Prometheus' own, other target labels) and
    // skips a Pod for an unknown template; B is not scraped at all, and the API server fails open on B's webhook.
    const annotationsScrape = `job="kubernetes-pods", kubernetes_namespace="${NAMESPACE}", kubernetes_pod_name="a-1", envoy_injector_release="${relA}"`;
    const series = {
      [`envoy_injector_template_kept_last_good{${annotationsScrape}}`]: '0x20',
      [`envoy_injector_admission_requests_total{${annotationsScrape}, result="skipped", reason="unknown_template"}`]: '0+1x20',
      [`apiserver_admission_webhook_fail_open_count{name="${otherB}", type="admit", operation="CREATE"}`]: '0+6x20',
      [`apiserver_admission_webhook_fail_open_count{name="${otherA}", type="admit", operation="CREATE"}`]: '0x20',
    };
    const annotations = (chart: Manifest[], alert: string, labels: Record<string, string>) => {
      const rule = alertRules(chart).find((candidate) => candidate.alert === alert);
      assert.ok(rule !== undefined);
      return Object.fromEntries(Object.entries(rule.annotations ?? {}).map(([key, text]) => [key, text.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_whole, label: string) => labels[label] ?? '')]));
    };
    const expected = (chart: Manifest[], alert: string, labels: Record<string, string>) => ({ exp_labels: labels, exp_annotations: annotations(chart, alert, labels) });
    const tests = [
      {
        name: 'two releases',
        interval: '1m',
        input_series: Object.entries(series).map(([name, values]) => ({ series: name, values })),
        alert_rule_test: [
          { eval_time: '8m', alertname: 'EnvoyInjectorDown', exp_alerts: [expected(b, 'EnvoyInjectorDown', { severity: 'critical', envoy_injector_release: relB })] },
          { eval_time: '8m', alertname: 'EnvoyInjectorPodsSkippedByMisconfiguration', exp_alerts: [expected(a, 'EnvoyInjectorPodsSkippedByMisconfiguration', { severity: 'warning', reason: 'unknown_template' })] },
          { eval_time: '8m', alertname: 'EnvoyInjectorWebhookUnreachable', exp_alerts: [expected(b, 'EnvoyInjectorWebhookUnreachable', { severity: 'critical', name: otherB })] },
        ],
      },
    ];
    await writeFile(join(work, 'two-test.yaml'), formatYaml({ rule_files: ['a-rules.yaml', 'b-rules.yaml'], evaluation_interval: '1m', tests }));
    const result = await promtool(bin, ['test', 'rules', 'two-test.yaml'], work);
    assert.equal(result.code, 0, result.output);
  });

  it('every dashboard query, its variables substituted, is valid PromQL', async (t) => {
    const bin = promtoolOrSkip(t);
    if (bin === undefined) return;
    const queries = dashboardQueries(manifests('webhook'));
    assert.ok(queries.length >= 6);
    // As recording rules: promtool parses each expression with Prometheus's parser.
    const rules = queries.map((query, index) => ({ record: `dashboard:query_${index}`, expr: substituteVariables(query.expr, { release: releaseLabel(manifests('webhook')), datasource: 'prometheus' }) }));
    const result = await checkRules(bin, 'dashboard.yaml', { groups: [{ name: 'dashboard', rules }] });
    assert.equal(result.code, 0, result.output);
    assert.match(result.output, new RegExp(`SUCCESS: ${rules.length} rules found`));
  });
});

/** One promtool test group: CASE's series, no alert at quietAt, exactly the expected one at firesAt. */
function unitTest(testCase: AlertCase, rules: readonly PromRule[], names: Readonly<Record<'JOB' | 'NS' | 'REL' | 'HOOKS', string>>) {
  const fill = (text: string): string => text.replace(/\bJOB\b/g, names.JOB).replace(/\bREL\b/g, names.REL).replace(/\bHOOKS\b/g, names.HOOKS).replace(/\bNS\b/g, names.NS);
  const rule = rules.find((candidate) => candidate.alert === testCase.alert);
  assert.ok(rule !== undefined, `alert ${testCase.alert} is rendered`);
  const labels = Object.fromEntries(Object.entries(testCase.labels).map(([key, value]) => [key, fill(value)]));
  // The rule's own annotations, $labels filled in: what Alertmanager would receive.
  const annotations = Object.fromEntries(
    Object.entries(rule.annotations ?? {}).map(([key, text]) => [
      key,
      text.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_whole, label: string) => {
        const value = labels[label];
        assert.ok(value !== undefined, `${testCase.alert}: its annotations use $labels.${label}, which the case does not expect`);
        return value;
      }),
    ]),
  );
  return {
    name: `${testCase.alert}: ${testCase.scenario}`,
    interval: '1m',
    input_series: Object.entries(testCase.series).map(([series, values]) => ({ series: fill(series), values })),
    alert_rule_test: [
      { eval_time: testCase.quietAt, alertname: testCase.alert, exp_alerts: [] },
      { eval_time: testCase.firesAt, alertname: testCase.alert, exp_alerts: [{ exp_labels: labels, exp_annotations: annotations }] },
    ],
  };
}

/** The envoy_injector_release label the release's injector puts on its series: the chart's METRICS_RELEASE. */
function releaseLabel(chart: readonly Manifest[]): string {
  return metricsRelease(chart, 'Deployment');
}

/** The METRICS_RELEASE the chart's workload of KIND sets. */
function metricsRelease(chart: readonly Manifest[], kind: 'Deployment' | 'DaemonSet'): string {
  const containers = ((only(chart, kind)['spec'] as { template: { spec: { containers: { env?: { name: string; value?: string }[] }[] } } }).template.spec.containers);
  const value = containers.flatMap((container) => container.env ?? []).find((entry) => entry.name === 'METRICS_RELEASE')?.value;
  assert.ok(value !== undefined, `the ${kind} sets METRICS_RELEASE`);
  return value;
}

/** What follows the purpose in the release's webhook names; empty in policy mode (no webhooks). */
function webhookNameSuffix(chart: readonly Manifest[]): string {
  const config = chart.find((manifest) => manifest.kind === 'MutatingWebhookConfiguration');
  const first = (config?.['webhooks'] as { name: string }[] | undefined)?.[0]?.name ?? '';
  return first.slice(first.indexOf('.') + 1);
}
