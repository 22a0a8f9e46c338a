import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from './fixtures.js';
import { only, renderChart, type Manifest } from './helm.js';

/** Where policy mode renders (the chart refuses it without the API). */
export const POLICY_API = 'admissionregistration.k8s.io/v1beta1/MutatingAdmissionPolicy';

/** All three monitoring objects on. */
export const MONITORING_ON = { serviceMonitor: { enabled: true }, prometheusRule: { enabled: true }, dashboards: { enabled: true } } as const;

/** The chart with every monitoring object, in webhook mode (VALUES merged), policy mode, or webhook mode with capture in CNI mode (its agents). */
export function renderMonitoring(mode: 'webhook' | 'policy' | 'cni', values: Record<string, unknown> = {}): Promise<Manifest[]> {
  const metrics = { ...MONITORING_ON, ...((values['metrics'] as Record<string, unknown> | undefined) ?? {}) };
  if (mode === 'policy') return renderChart({ ...values, mode: 'policy', metrics }, { apiVersions: [POLICY_API] });
  return renderChart({ ...values, ...(mode === 'cni' ? { proxy: { capture: { mode: 'cni' } } } : {}), metrics });
}

export interface PromRule {
  readonly alert?: string;
  readonly record?: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

/** The rendered PrometheusRule's spec: a Prometheus rule file as it stands. */
export function ruleFile(manifests: readonly Manifest[]): { groups: { name: string; rules: PromRule[] }[] } {
  return only(manifests, 'PrometheusRule')['spec'] as { groups: { name: string; rules: PromRule[] }[] };
}

export function alertRules(manifests: readonly Manifest[]): PromRule[] {
  return ruleFile(manifests).groups.flatMap((group) => group.rules.filter((rule) => rule.alert !== undefined));
}

interface ServicePort {
  readonly name?: string;
  readonly port: number;
}

/**
 * The Service the ServiceMonitor scrapes and the port it names: the one
 * Service whose labels match its selector and that has that port name.
 * Throws when there is none, as the Prometheus Operator would find no target.
 */
export function scrapedService(manifests: readonly Manifest[]): { service: Manifest; port: ServicePort; endpoint: Record<string, unknown> } {
  const monitor = only(manifests, 'ServiceMonitor');
  const spec = monitor['spec'] as { selector: { matchLabels: Record<string, string> }; endpoints: Record<string, unknown>[] };
  const [endpoint] = spec.endpoints;
  if (endpoint === undefined || spec.endpoints.length !== 1) throw new Error('the ServiceMonitor has not exactly one endpoint');
  const matches = manifests.filter(
    (manifest) => manifest.kind === 'Service' && Object.entries(spec.selector.matchLabels).every(([key, value]) => manifest.metadata.labels?.[key] === value),
  );
  const withPort = matches.flatMap((service) => {
    const ports = ((service['spec'] as { ports?: ServicePort[] }).ports ?? []).filter((port) => port.name === endpoint['port']);
    return ports.map((port) => ({ service, port, endpoint }));
  });
  if (withPort.length !== 1) throw new Error(`expected one Service with port "${String(endpoint['port'])}" matching the ServiceMonitor, found ${withPort.length}`);
  return withPort[0] as { service: Manifest; port: ServicePort; endpoint: Record<string, unknown> };
}

export interface DashboardQuery {
  readonly panel: string;
  readonly expr: string;
}

/** The dashboard the rendered ConfigMap holds. */
export function renderedDashboard(manifests: readonly Manifest[]): { panels: { title: string; targets?: { expr: string }[] }[]; templating: { list: { name: string; type: string }[] } } {
  const configMap = manifests.find((manifest) => manifest.kind === 'ConfigMap' && manifest.metadata.labels?.['grafana_dashboard'] === '1');
  if (configMap === undefined) throw new Error('no ConfigMap labeled grafana_dashboard: "1"');
  const data = configMap['data'] as Record<string, string>;
  const text = data['envoy-injector.json'];
  if (text === undefined) throw new Error('the dashboard ConfigMap has no envoy-injector.json');
  return JSON.parse(text) as ReturnType<typeof renderedDashboard>;
}

export function dashboardQueries(manifests: readonly Manifest[]): DashboardQuery[] {
  return renderedDashboard(manifests).panels.flatMap((panel) => (panel.targets ?? []).map((target) => ({ panel: panel.title, expr: target.expr })));
}

/**
 * A Grafana query as Prometheus receives it: the template variables
 * substituted (Grafana's built-in intervals and ours). Throws on a variable
 * left over, so a new one cannot slip past the check.
 */
export function substituteVariables(expr: string, variables: Readonly<Record<string, string>>): string {
  const builtIn: Record<string, string> = { __rate_interval: '5m', __interval: '1m', __range: '1h' };
  const all = { ...builtIn, ...variables };
  const result = expr.replace(/\$\{(\w+)\}|\$(\w+)/g, (whole, braced: string | undefined, bare: string | undefined) => {
    const name = braced ?? bare ?? '';
    const value = all[name];
    if (value === undefined) throw new Error(`query uses the unknown variable ${whole}: ${expr}`);
    return value;
  });
  return result;
}

/** The series names (envoy_injector_*) an expression reads: not the label envoy_injector_release (followed by a matcher). */
export function injectorSeries(expr: string): string[] {
  return [...new Set(expr.match(/\benvoy_injector_[a-z0-9_]+\b(?!\s*(?:=|!=))/g) ?? [])].filter((name) => !SERIES_LABELS.has(name));
}

/** Labels, not series, that our series carry and a rule may group by: the release (every series) and the CNI agent's node. */
const SERIES_LABELS: ReadonlySet<string> = new Set(['envoy_injector_release', 'envoy_injector_node']);

/** The runbook's page: one `##` section per alert, which the alerts' runbook_url point at. */
export const RUNBOOK_PATH = 'docs/runbook.md';

/** The runbook's `##` sections: their titles and the anchors GitHub makes of them. */
export function runbookSections(): Map<string, string> {
  const text = readFileSync(join(ROOT, RUNBOOK_PATH), 'utf8');
  return new Map(
    [...text.matchAll(/^## (.+)$/gm)].map((match) => {
      const title = (match[1] ?? '').trim();
      return [title, title.toLowerCase().replace(/[^\p{L}\p{N} _-]/gu, '').replace(/ /g, '-')];
    }),
  );
}
