import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { captureLines, explainCapture, type CaptureExplanation } from './capture-text.js';
import { describeSource, proxyValues, type ProxyValue } from './explain-proxy.js';
import { explainLifecycle, type LifecycleExplanation } from './lifecycle-text.js';
import {
  arrayAt,
  describeTemplateSource,
  entryName,
  injectorAnnotations,
  isJsonObject,
  objectAt,
  processManifests,
  stringAt,
  type LabelSelector,
  type ManifestReport,
} from '../injection/index.js';
import { compilePolicy, POLICY_RULE_PLACES } from '../policy/compile-policy.js';
import { loadTemplates, readInput, type CommandIo } from './io.js';
import { parseAllowedOverrides, parseSelectorsOption } from './options.js';

export const EXPLAIN_HELP = `Usage: envoy-injector explain -f FILE|- [options]

For each Pod and Pod template in FILE, shows what the webhook would decide if
it were created: every rule looked at and the one that decided, then what
would change (containers, volumes, annotations, labels, overrides) and the warnings.

Options:
  -f, --filename FILE         manifest to read ("-" for stdin)
      --namespace NAME        namespace of objects that name none (default "default")
      --namespace-labels L    labels of the namespace, as k=v,k2=v2 (default: none); its
                              envoy-injector.io/template picks the template, its
                              pod-security.kubernetes.io/enforce decides traffic capture too
      --namespace-annotations L  annotations of the namespace, as k=v,k2=v2: its
                              envoy-injector.io/proxy-* are its Pods' proxy defaults, its
                              openshift.io/sa.scc.uid-range gives the proxy's uid
      --never-inject-selector JSON   Pods never injected unless annotated "true" (as serve's)
      --always-inject-selector JSON  Pods always injected unless annotated "false" (as serve's)
      --excluded-namespaces L comma-separated namespaces never injected (beyond kube-*)
      --template-file F       a ConfigMap manifest or a bare template (default: the bundled seed template)
      --native-sidecar MODE   on | off: the server's native-sidecar setting (default off)
      --allowed-overrides L   the proxy-* annotations allowed (default: the resource ones)
      --mode MODE             webhook (default) | policy: which one acts, and where each rule lives in the policy
  -o, --output FORMAT         text (default) | json
  -h, --help
`;

export interface AddedContainer {
  readonly name: string;
  readonly image: string;
}

/** What `explain --output json` prints for each Pod or Pod template. */
export interface Explanation {
  readonly kind: string;
  readonly name: string;
  readonly namespace: string;
  readonly decision: 'injected' | 'skipped';
  /** Who acts on the Pod: the webhook, or the API server through the MutatingAdmissionPolicy. */
  readonly mode: 'webhook' | 'policy';
  readonly reason: string;
  readonly rule: string;
  readonly message: string;
  readonly template?: string;
  /** When injected: whether the template was named by the Pod, picked by its namespace, or the default. */
  readonly templateSource?: 'pod' | 'namespace' | 'default';
  /** When a proxy of ours was injected: its image and resources, each with where it came from. */
  readonly proxy?: readonly ProxyValue[];
  readonly nativeSidecar?: boolean;
  /** When injected: whether the Pod's traffic goes through the proxy, and the rules' exclusions. */
  readonly capture?: CaptureExplanation;
  /** When injected with a template that has proxyLifecycle: holding the app, the drain. */
  readonly lifecycle?: LifecycleExplanation;
  /** When injected and the Pod sets spec.resources: each value padded, before and after (empty: none needed). */
  readonly podResources?: readonly { field: string; before: string; after: string }[];
  /** `where`, in policy mode: the part of the compiled policy that holds the rule. */
  readonly trace: readonly { rule: string; outcome: string; detail: string; where?: string }[];
  readonly changes: {
    readonly containers: readonly AddedContainer[];
    readonly initContainers: readonly AddedContainer[];
    readonly volumes: readonly string[];
    readonly imagePullSecrets: readonly string[];
    readonly annotations: readonly string[];
    readonly labels: readonly string[];
  };
  readonly kept: readonly { list: string; name: string }[];
  readonly overrides: readonly { annotation: string; value: string; field: string; source: 'pod' | 'namespace' }[];
  readonly warnings: readonly string[];
  readonly patch: readonly unknown[];
}

/** What policy mode does with the tcpSocket probes the webhook rewrites (docs/policy-mode.md). */
const POLICY_TCP_PROBES =
  "policy mode leaves this Pod's tcpSocket probes as written: under capture they pass while the proxy runs, whether or not the app listens; the webhook rewrites them to the proxy's probe listener";

/** What policy mode does with the PROXY protocol the webhook sets up (docs/policy-mode.md). */
const POLICY_PROXY_PROTOCOL =
  'policy mode ignores envoy-injector.io/inbound-proxy-protocol: the app gets no PROXY protocol header and sees the Pod\'s own address as every client\'s; the webhook gives the proxy the per-Pod listeners that send it';

/** A Pod the webhook leaves uninjected for its per-Pod bootstrap's size, which policy mode never writes (docs/policy-mode.md). */
const POLICY_INJECTS_WITHOUT_BOOTSTRAP =
  'policy mode injects this Pod: it writes no per-Pod bootstrap (envoy-injector.io/proxy-config), and without it the annotations fit; its tcpSocket probes are left as written and its app gets no PROXY protocol header';

/** What policy mode does with TPROXY interception (docs/policy-mode.md). */
const POLICY_TPROXY =
  "policy mode captures this Pod by REDIRECT, not TPROXY (envoy-injector.io/capture-interception, capture.interception): the app sees the Pod's own address as every client's; the webhook gives envoy-init the TPROXY rules and the proxy its transparent listener and NET_ADMIN";

export async function runExplain(args: readonly string[], io: CommandIo): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      filename: { type: 'string', short: 'f' },
      namespace: { type: 'string', default: 'default' },
      'namespace-labels': { type: 'string', default: '' },
      'namespace-annotations': { type: 'string', default: '' },
      'never-inject-selector': { type: 'string' },
      'always-inject-selector': { type: 'string' },
      'excluded-namespaces': { type: 'string', default: '' },
      'template-file': { type: 'string' },
      'native-sidecar': { type: 'string', default: 'off' },
      'allowed-overrides': { type: 'string' },
      output: { type: 'string', short: 'o', default: 'text' },
      mode: { type: 'string', default: 'webhook' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    io.stdout.write(EXPLAIN_HELP);
    return 0;
  }
  if (values.filename === undefined) throw new UsageError('explain: -f FILE is required ("-" reads stdin)');
  if (values.output !== 'text' && values.output !== 'json') throw new UsageError('--output: must be text or json');
  if (values['native-sidecar'] !== 'on' && values['native-sidecar'] !== 'off') throw new UsageError('--native-sidecar: must be on or off');
  const mode = values.mode;
  if (mode !== 'webhook' && mode !== 'policy') throw new UsageError('--mode: must be webhook or policy');
  const labels = parseLabels(values['namespace-labels'], '--namespace-labels');
  const annotations = injectorAnnotations(parseLabels(values['namespace-annotations'], '--namespace-annotations'));
  const selectors = {
    ...optionalSelectors('neverInjectSelectors', '--never-inject-selector', values['never-inject-selector']),
    ...optionalSelectors('alwaysInjectSelectors', '--always-inject-selector', values['always-inject-selector']),
  };
  const templates = await loadTemplates(values['template-file'], io);
  // Policy mode: templates the API server would refuse as a policy (a CEL limit) are an error here too.
  if (mode === 'policy') compilePolicy(templates, selectors);
  const input = await readInput(values.filename, io);
  const { reports } = processManifests(input, {
    templates,
    defaultNamespace: values.namespace,
    namespaceLabels: () => labels,
    namespaceAnnotations: () => annotations,
    decision: {
      ...selectors,
      excludedNamespaces: values['excluded-namespaces'].split(',').map((name) => name.trim()).filter((name) => name !== ''),
      nativeSidecar: values['native-sidecar'] === 'on',
      ...(values['allowed-overrides'] === undefined ? {} : { allowedOverrides: parseAllowedOverrides(values['allowed-overrides']) }),
    },
  });
  const explanations = reports.map((report) => toExplanation(report, mode));
  io.stdout.write(values.output === 'json' ? JSON.stringify(explanations, null, 2) + '\n' : explanations.map(formatExplanation).join('\n'));
  return 0;
}

export function toExplanation(report: ManifestReport, mode: 'webhook' | 'policy' = 'webhook'): Explanation {
  const { decision, injection } = report;
  return {
    kind: report.kind,
    name: report.name,
    namespace: report.namespace,
    decision: decision.inject ? 'injected' : 'skipped',
    mode,
    reason: decision.reason,
    rule: decision.rule,
    message: decision.message,
    ...(decision.inject ? { template: `${decision.template.name}@${decision.template.hash}`, templateSource: decision.templateSource, proxy: proxyValues(report), nativeSidecar: decision.nativeSidecar } : {}),
    ...(report.capture === undefined ? {} : { capture: explainCapture(report.capture, report.tcpProbes, report.proxyProtocol) }),
    ...lifecycleOf(report),
    ...(injection?.podResources === undefined ? {} : { podResources: injection.podResources }),
    trace: mode === 'policy' ? decision.trace.map((step) => ({ ...step, where: POLICY_RULE_PLACES[step.rule] })) : decision.trace,
    changes: {
      containers: addedContainers(report, 'containers'),
      initContainers: addedContainers(report, 'initContainers'),
      volumes: injection?.status.volumes ?? [],
      imagePullSecrets: injection?.status.imagePullSecrets ?? [],
      annotations: injection?.annotations ?? [],
      labels: injection?.labels ?? [],
    },
    kept: injection?.kept ?? [],
    overrides: report.overrides,
    warnings: [
      ...report.warnings,
      ...(mode === 'policy' && (report.tcpProbes?.rewrites.length ?? 0) > 0 ? [POLICY_TCP_PROBES] : []),
      ...(mode === 'policy' && (report.proxyProtocol?.ports.length ?? 0) > 0 ? [POLICY_PROXY_PROTOCOL] : []),
      ...(mode === 'policy' && report.capture?.capture === true && report.capture.interception === 'tproxy' ? [POLICY_TPROXY] : []),
      ...(mode === 'policy' && report.fitsWithoutBootstrap === true ? [POLICY_INJECTS_WITHOUT_BOOTSTRAP] : []),
    ],
    patch: injection?.patch ?? [],
  };
}

/** The human-readable form: the decision first, then the rules, then the changes. */
export function formatExplanation(explanation: Explanation): string {
  const lines: string[] = [];
  const where = `${explanation.kind} ${explanation.namespace}/${explanation.name || '(generated name)'}`;
  const verdict = explanation.decision === 'injected' ? `INJECTED with template ${explanation.template}${explanation.nativeSidecar ? ' (native sidecar)' : ''}` : 'NOT INJECTED';
  lines.push(`${where}: ${verdict}`);
  lines.push(`  because: ${explanation.message} [rule ${explanation.rule}, reason ${explanation.reason}]`);
  if (explanation.templateSource !== undefined) lines.push(`  template: ${explanation.template ?? ''}, ${describeTemplateSource(explanation.templateSource, explanation.namespace)}`);
  lines.push(
    explanation.mode === 'policy'
      ? '  acted on by: the API server itself, through the MutatingAdmissionPolicy (no webhook call)'
      : '  acted on by: the webhook (the API server calls envoy-injector)',
  );
  lines.push('  rules:');
  const width = Math.max(...explanation.trace.map((step) => step.rule.length));
  for (const step of explanation.trace) {
    const mark = step.outcome === 'continue' ? 'pass  ' : step.outcome === 'inject' ? 'INJECT' : 'SKIP  ';
    lines.push(`    ${step.rule.padEnd(width)}  ${mark}  ${step.detail}${step.where === undefined ? '' : `  [${step.where}]`}`);
  }
  if (explanation.decision === 'injected') {
    lines.push('  changes:');
    const { changes } = explanation;
    for (const { name, image } of changes.containers) lines.push(`    + container ${name} (${image})`);
    for (const { name, image } of changes.initContainers) lines.push(`    + init container ${name} (${image})`);
    for (const name of changes.volumes) lines.push(`    + volume ${name}`);
    for (const name of changes.imagePullSecrets) lines.push(`    + image pull secret ${name}`);
    for (const name of changes.annotations) lines.push(`    + annotation ${name}`);
    for (const name of changes.labels) lines.push(`    + label ${name}`);
    for (const { list, name } of explanation.kept) lines.push(`    = ${list} ${name} kept from the Pod`);
  }
  if (explanation.capture !== undefined) {
    const [head, ...rules] = captureLines(explanation.capture);
    lines.push(`  ${head ?? ''}`, ...rules.map((rule) => `    ${rule}`));
  }
  if (explanation.proxy !== undefined && explanation.proxy.length > 0) {
    lines.push('  proxy (where each value comes from):');
    const width = Math.max(...explanation.proxy.map((entry) => entry.field.length));
    for (const { field, value, source } of explanation.proxy) lines.push(`    ${field.padEnd(width)}  ${value}  (${describeSource(source, explanation.namespace)})`);
  }
  if (explanation.lifecycle !== undefined) lines.push(`  proxy lifecycle: ${explanation.lifecycle.message}`);
  if (explanation.podResources !== undefined) {
    lines.push(`  pod-level resources: ${explanation.podResources.length === 0 ? 'nothing to pad (the sidecar adds nothing to what the containers aggregate to)' : 'padded by what the sidecar adds'}`);
    for (const { field, before, after } of explanation.podResources) lines.push(`    ${field}: ${before} -> ${after}`);
  }
  if (explanation.overrides.length > 0) {
    lines.push('  overrides:');
    for (const { annotation, value, field, source } of explanation.overrides) lines.push(`    ${annotation}: ${value} -> proxy ${field}${source === 'namespace' ? ` (namespace "${explanation.namespace}"'s default)` : ''}`);
  }
  if (explanation.warnings.length > 0) {
    lines.push(explanation.mode === 'policy' ? '  warnings (for you only: the policy cannot send warnings):' : '  warnings:');
    for (const warning of explanation.warnings) lines.push(`    ! ${warning}`);
  }
  return lines.join('\n') + '\n';
}

function lifecycleOf(report: ManifestReport): { lifecycle?: LifecycleExplanation } {
  const lifecycle = explainLifecycle(report);
  return lifecycle === undefined ? {} : { lifecycle };
}

/** The containers injection added to a list, with their images (after overrides). */
function addedContainers({ injection, injected }: ManifestReport, list: 'containers' | 'initContainers'): AddedContainer[] {
  if (injection === undefined) return [];
  const built = arrayAt(objectAt(injected, 'spec'), list) ?? [];
  return injection.status[list].map((name) => {
    const container = built.find((entry) => entryName(entry) === name);
    return { name, image: (isJsonObject(container) ? stringAt(container, 'image') : undefined) ?? '' };
  });
}

function optionalSelectors<K extends string>(key: K, flag: string, json: string | undefined): Partial<Record<K, LabelSelector[]>> {
  return json === undefined ? {} : ({ [key]: parseSelectorsOption(flag, json) } as Partial<Record<K, LabelSelector[]>>);
}

function parseLabels(text: string, flag: string): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const pair of text.split(',').map((item) => item.trim()).filter((item) => item !== '')) {
    const [key, ...rest] = pair.split('=');
    if (key === undefined || key === '' || rest.length === 0) throw new UsageError(`${flag}: "${pair}" is not key=value`);
    labels[key] = rest.join('=');
  }
  return labels;
}
