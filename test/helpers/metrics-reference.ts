import { Reason } from '../../src/injection/index.js';
import { CniAgentMetrics } from '../../src/node/agent-metrics.js';
import { ErrorReason, InjectorMetrics } from '../../src/server/metrics.js';

/**
 * docs/reference/metrics.md: the injector's own metrics as its registry holds
 * them (name, type, help, labels), every mode's included, and the values of
 * the `reason` label. test/docs-references.test.ts fails when the file is
 * stale (UPDATE_GOLDEN=1 rewrites it); test/monitoring-series.test.ts checks
 * that these are the envoy_injector_* series a running injector of each mode
 * exports.
 */
export const METRICS_REFERENCE_PATH = 'docs/reference/metrics.md';

export interface MetricEntry {
  readonly name: string;
  readonly type: string;
  readonly help: string;
  readonly labels: readonly string[];
}

/** A registry holding every metric of every mode: the gauges that only some modes register, registered too. */
function fullRegistry(): InjectorMetrics {
  const metrics = new InjectorMetrics({ processMetrics: false });
  metrics.trackCaBundle(() => true);
  metrics.trackCaExpiry(() => undefined);
  metrics.trackPolicySync(() => true);
  metrics.trackPolicyRefused(() => false);
  return metrics;
}

export function injectorMetrics(): MetricEntry[] {
  return entries(fullRegistry().registry);
}

/** The CNI node agent's own metrics (`envoy-injector cni-agent`). */
export function cniAgentMetrics(): MetricEntry[] {
  return entries(new CniAgentMetrics({ processMetrics: false }).registry);
}

function entries(registry: InjectorMetrics['registry']): MetricEntry[] {
  return registry
    .getMetricsAsArray()
    .map((metric) => {
      const { name, help, type, labelNames } = metric as unknown as { name: string; help: string; type: string; labelNames?: readonly string[] };
      return { name, help, type, labels: [...(labelNames ?? [])] };
    })
    .sort((a, b) => a.name.localeCompare(b.name));
}

/** The series names a metric exposes: a histogram's _bucket, _sum and _count beside its name. */
export function seriesNames(metrics: readonly MetricEntry[]): Set<string> {
  const names = new Set<string>();
  for (const metric of metrics) {
    names.add(metric.name);
    if (metric.type === 'histogram') for (const suffix of ['_bucket', '_sum', '_count']) names.add(metric.name + suffix);
  }
  return names;
}

const tableRow = (metric: MetricEntry): string =>
  `| \`${metric.name}\` | ${metric.type} | ${metric.labels.map((label) => `\`${label}\``).join(', ')} | ${metric.help.replace(/\|/g, '\\|')} |`;

export function renderMetricsReference(): string {
  const lines = [
    '# Metrics reference',
    '',
    '<!-- Generated from the injector\'s metric registry by test/helpers/metrics-reference.ts: do not edit.',
    '     UPDATE_GOLDEN=1 node --import tsx --test test/docs-references.test.ts rewrites it. -->',
    '',
    'Every metric the injector exports beside the Node.js process metrics of',
    'prom-client (`process_*`, `nodejs_*`), on `GET /metrics` of every replica.',
    'The `(--cert-mode auto)` ones exist only in that certificate mode, the',
    '`(policy mode)` ones only with `--mode policy`. No label ever holds a Pod',
    'name: every label has a fixed set of values.',
    '',
    '| metric | type | labels | help |',
    '|---|---|---|---|',
  ];
  for (const metric of injectorMetrics()) lines.push(tableRow(metric));
  lines.push(
    '',
    '## The CNI node agent',
    '',
    'The agent of capture in CNI mode (`envoy-injector cni-agent`, the chart\'s',
    'DaemonSet) serves its own on `GET /metrics` of `--metrics-port` (chart value',
    '`cniAgent.metricsPort`), beside the process metrics:',
    '',
    '| metric | type | labels | help |',
    '|---|---|---|---|',
    ...cniAgentMetrics().map(tableRow),
  );
  lines.push(
    '',
    '## The `reason` label',
    '',
    '`envoy_injector_admission_requests_total{reason}` holds the decision\'s reason',
    'for an answered review, or why the review ended in an error:',
    '',
    `- decisions: ${Object.values(Reason)
      // inject's own: no review is decided offline.
      .filter((reason) => reason !== Reason.requestedOffline)
      .map((reason) => `\`${reason}\``).join(', ')}`,
    `- errors: ${Object.values(ErrorReason).map((reason) => `\`${reason}\``).join(', ')}`,
  );
  return `${lines.join('\n')}\n`;
}
