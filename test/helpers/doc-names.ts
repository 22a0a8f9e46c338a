import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse as parseYamlText } from 'yaml';
import { NoticeCause, WORKLOAD_EVENTS } from '../../src/events/workload-notices.js';
import { Annotations, CaptureReason, OverrideName, OVERRIDE_ANNOTATION_PREFIX, PodSecurityLabel, Reason, Rule } from '../../src/injection/index.js';
import { ErrorReason } from '../../src/server/metrics.js';
import { COMMANDS, type CommandName } from './cli-reference.js';
import type { DocCode } from './docs-markdown.js';
import { ROOT } from './fixtures.js';

/**
 * The names the docs write and the names the code defines, for
 * test/docs-names.test.ts: every flag, annotation, label, chart value,
 * metric and reason a page names must exist, and every one the code
 * defines must be named by a page written by hand.
 */

export interface NameProblem {
  readonly file: string;
  readonly line: number;
  readonly name: string;
  readonly why: string;
}

/** Every file under FOLDER (relative to the root) whose name ends with one of EXTENSIONS. */
function filesUnder(folder: string, extensions: readonly string[]): string[] {
  return (readdirSync(join(ROOT, folder), { recursive: true, withFileTypes: true }) as { name: string; parentPath: string; isFile(): boolean }[])
    .filter((entry) => entry.isFile() && extensions.some((extension) => entry.name.endsWith(extension)))
    .map((entry) => join(entry.parentPath, entry.name));
}

const CHART_TEMPLATES = filesUnder('charts/envoy-injector/templates', ['.yaml', '.tpl', '.txt']).map((file) => readFileSync(file, 'utf8')).join('\n');
const SOURCES = filesUnder('src', ['.ts']).map((file) => readFileSync(file, 'utf8')).join('\n');

/** The options of envoy-init's rule script, init/capture-rules.sh: the patterns of its `case` (`--proxy-uid=*)`). */
export function captureScriptFlags(): Set<string> {
  const script = readFileSync(join(ROOT, 'init/capture-rules.sh'), 'utf8');
  return new Set([...script.matchAll(/^\s+(--[a-z][a-z0-9-]*)=\*\)/gm)].map((match) => match[1] ?? ''));
}

// ---------------------------------------------------------------------------
// Flags

/** Tools whose command lines the docs show: their flags are theirs, not ours. */
const FOREIGN_TOOLS = new Set(['helm', 'kubectl', 'docker', 'kind', 'node', 'npm', 'npx', 'curl', 'git', 'apt-get', 'promtool', 'istioctl', 'uptime', 'xz']);

/** Flags of other programs that the docs name on their own, each with whose it is. */
export const FOREIGN_FLAGS: Readonly<Record<string, string>> = {
  '--set': 'helm',
  '--set-file': 'helm',
  '--server-side': 'helm and kubectl',
  '--reuse-values': 'helm',
  '--feature-gates': 'kube-apiserver',
  '--runtime-config': 'kube-apiserver',
  '--openshift-config': "kube-apiserver (OpenShift's fork)",
  '--enable-admission-plugins': 'kube-apiserver',
  '--drain-time-s': 'Envoy',
  '--drain-strategy': 'Envoy',
  '--concurrency': 'Envoy',
  '--log-level': 'Envoy, and ours',
  '--config-yaml': 'Envoy',
  '--config-path': 'Envoy',
  '--disable-hot-restart': 'Envoy',
  '--uid-owner': 'iptables',
  '--gid-owner': 'iptables',
  '--save-mark': "iptables' CONNMARK target",
  '--restore-mark': "iptables' CONNMARK target",
  '--on-port': "iptables' TPROXY target",
  '--tproxy-mark': "iptables' TPROXY target",
  '--max-semi-space-size': 'node',
  '--expose-gc': 'node',
  '--enable-source-maps': 'node',
  '--proxy-protocol-port': "the node tier's app (test/node/images/app.py)",
};

/** A code item's lines, a shell line continued with a backslash joined to the next, an inline span on one line. */
function commandLines(item: DocCode): { text: string; offset: number }[] {
  if (item.kind === 'inline') return [{ text: item.text.replace(/\n/g, ' '), offset: 0 }];
  const lines: { text: string; offset: number }[] = [];
  let pending: { text: string; offset: number } | undefined;
  item.text.split('\n').forEach((line, offset) => {
    const current = pending === undefined ? { text: line, offset } : { text: `${pending.text} ${line}`, offset: pending.offset };
    if (line.endsWith('\\')) pending = { text: current.text.slice(0, -1), offset: current.offset };
    else {
      pending = undefined;
      lines.push(current);
    }
  });
  if (pending !== undefined) lines.push(pending);
  return lines;
}

/** A command line's segments: split at pipes and `&&`, a trailing `# comment` dropped. */
function segments(line: string): string[][] {
  return line
    .replace(/(^|\s)#.*$/, '')
    .split(/\||&&|;/)
    .map((segment) => segment.trim().split(/\s+/).filter((token) => token !== ''))
    .filter((tokens) => tokens.length > 0);
}

/** The command of ours a segment runs, and the index its arguments start at; 'foreign' for another tool's. */
function commandOf(tokens: readonly string[]): { command: CommandName; from: number } | 'foreign' | undefined {
  const words = tokens.filter((token) => !/^[A-Z_]+=/.test(token));
  const ours = words.indexOf('envoy-injector');
  const named = words[ours + 1];
  if (ours !== -1 && COMMANDS.includes(named as CommandName)) return { command: named as CommandName, from: tokens.indexOf(named as string) + 1 };
  if (words[0] === 'npm' && words[1] === 'start') return { command: 'serve', from: tokens.indexOf('start') + 1 };
  if (COMMANDS.includes(words[0] as CommandName)) return { command: words[0] as CommandName, from: tokens.indexOf(words[0] as string) + 1 };
  if (FOREIGN_TOOLS.has(words[0] ?? '')) return 'foreign';
  return undefined;
}

function flagsIn(tokens: readonly string[]): string[] {
  return tokens.flatMap((token) => /^(--[a-z][a-z0-9-]*)/.exec(token.replace(/^[`"'([]+/, ''))?.[1] ?? []);
}

/**
 * Every `--flag` a page's code names: a command line's flags must be that
 * command's; a lone flag one of any command's, envoy-init's rule script's
 * or FOREIGN_FLAGS'.
 */
export function flagProblems(code: readonly DocCode[], flagsByCommand: ReadonlyMap<CommandName, ReadonlySet<string>>): NameProblem[] {
  const all = new Set([...[...flagsByCommand.values()].flatMap((flags) => [...flags]), ...captureScriptFlags()]);
  const problems: NameProblem[] = [];
  for (const item of code) {
    if (item.kind === 'block' && ['yaml', 'json', 'text'].includes(item.lang)) continue;
    for (const { text: line, offset } of commandLines(item)) {
      for (const tokens of segments(line)) {
        const context = commandOf(tokens);
        if (context === 'foreign') continue;
        const where = { file: item.file, line: item.line + offset };
        if (context === undefined) {
          for (const flag of flagsIn(tokens)) if (!all.has(flag) && FOREIGN_FLAGS[flag] === undefined) problems.push({ ...where, name: flag, why: 'no command has this flag (nor is it in FOREIGN_FLAGS)' });
          continue;
        }
        const own = flagsByCommand.get(context.command) ?? new Set<string>();
        for (const flag of flagsIn(tokens.slice(context.from))) if (!own.has(flag)) problems.push({ ...where, name: flag, why: `not a flag of envoy-injector ${context.command}` });
      }
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------
// Annotations and labels

const KEY = /envoy-injector\.io\/([a-z0-9-]*)(\*)?/g;

/** The `envoy-injector.io/` keys the code defines: in src/ and the chart's templates, and each override's. */
export function definedKeys(): Set<string> {
  const keys = new Set<string>();
  for (const match of `${SOURCES}\n${CHART_TEMPLATES}`.matchAll(KEY)) if (/[a-z0-9]$/.test(match[1] ?? '')) keys.add(`envoy-injector.io/${match[1] ?? ''}`);
  for (const name of Object.values(OverrideName)) keys.add(OVERRIDE_ANNOTATION_PREFIX + name);
  return keys;
}

/** The keys (ours and Kubernetes' or the seed's) whose meaning a page must say. */
export function keysToDocument(): string[] {
  return [...new Set([...definedKeys(), ...Object.values(Annotations), PodSecurityLabel.enforce])].sort();
}

/**
 * Every `envoy-injector.io/...` key TEXT names must be defined; `proxy-*` and
 * `proxy-` stand for a prefix, and `template-` may also be kubectl's removal
 * of the label `template`.
 */
export function keyProblems(file: string, text: string, defined: ReadonlySet<string>): NameProblem[] {
  const problems: NameProblem[] = [];
  for (const match of text.matchAll(KEY)) {
    const name = match[1] ?? '';
    if (name === '') continue;
    const key = `envoy-injector.io/${name}`;
    const prefix = match[2] === '*' || name.endsWith('-');
    const known = prefix ? [...defined].some((candidate) => candidate.startsWith(key)) || defined.has(key.slice(0, -1)) : defined.has(key);
    if (!known) problems.push({ file, line: lineOf(text, match.index), name: match[0], why: 'no annotation or label of that name in src/ or the chart' });
  }
  return problems;
}

// ---------------------------------------------------------------------------
// Chart values

type Values = Readonly<Record<string, unknown>>;

export function chartValues(): Values {
  return parseYamlText(readFileSync(join(ROOT, 'charts/envoy-injector/values.yaml'), 'utf8')) as Values;
}

function isMapping(value: unknown): value is Values {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Whether PATH is a value of the chart (a leaf, or a mapping of values). */
export function valueExists(values: Values, path: readonly string[]): boolean {
  let node: unknown = values;
  for (const key of path) {
    if (!isMapping(node) || !Object.hasOwn(node, key)) return false;
    node = node[key];
  }
  return true;
}

/** Dotted paths in code whose first key is a top-level value; not a file name, a host or a field of something else. */
const VALUE_PATH = /(?<![\w./-])([a-z][A-Za-z0-9]*)((?:\.[A-Za-z][A-Za-z0-9]*)+)(?![\w/-]|\.[A-Za-z])/g;
const NOT_VALUES = /\.(io|com|org|local|svc|ts|js|json|yaml|md|tpl|sh)$/;

/** The keys of a `yaml values` block not in the chart's values: a mapping the chart gives empty (`{}`) or a scalar takes anything below it. */
function valuesBlockProblems(item: DocCode, values: Values): NameProblem[] {
  const problems: NameProblem[] = [];
  const walk = (given: unknown, known: unknown, path: string[]): void => {
    if (!isMapping(given) || !isMapping(known) || Object.keys(known).length === 0) return;
    for (const [key, value] of Object.entries(given)) {
      if (!Object.hasOwn(known, key)) problems.push({ file: item.file, line: item.line, name: [...path, key].join('.'), why: 'not a value of the chart' });
      else walk(value, known[key], [...path, key]);
    }
  };
  walk(parseYamlText(item.text), values, []);
  return problems;
}

/** Every chart value a page's code names exists in values.yaml. */
export function valueProblems(code: readonly DocCode[], values: Values): NameProblem[] {
  const problems: NameProblem[] = [];
  for (const item of code) {
    if (item.kind === 'block' && item.lang === 'yaml') {
      if (item.meta.split(/\s+/).includes('values')) problems.push(...valuesBlockProblems(item, values));
      continue;
    }
    for (const match of item.text.matchAll(VALUE_PATH)) {
      const [text, top = ''] = match;
      if (!Object.hasOwn(values, top) || NOT_VALUES.test(text)) continue;
      if (!valueExists(values, text.split('.'))) problems.push({ file: item.file, line: item.line + lineOf(item.text, match.index) - 1, name: text, why: 'not a value of the chart' });
    }
  }
  return problems;
}

// ---------------------------------------------------------------------------
// Metrics

const METRIC = /\benvoy_injector_[a-z0-9_]*[a-z0-9*]/g;

/** Not series but labels series carry (`--metrics-release`, RELEASE_LABEL in server/metrics.ts; the CNI agent's NODE_LABEL). */
const METRIC_LABELS: ReadonlySet<string> = new Set(['envoy_injector_release', 'envoy_injector_node']);

/** Every envoy_injector_* series TEXT names is exported (`envoy_injector_foo_*` is a prefix). */
export function metricProblems(file: string, text: string, series: ReadonlySet<string>): NameProblem[] {
  const problems: NameProblem[] = [];
  for (const match of text.matchAll(METRIC)) {
    const name = match[0];
    if (METRIC_LABELS.has(name)) continue;
    const known = name.endsWith('*') ? [...series].some((candidate) => candidate.startsWith(name.slice(0, -1))) : series.has(name);
    if (!known) problems.push({ file, line: lineOf(text, match.index), name, why: 'no such metric in the registry' });
  }
  return problems;
}

// ---------------------------------------------------------------------------
// Reasons and rules

/** The fixed sets a reader meets in logs, metrics, audit annotations, `explain` and Events. */
export function reasonsToDocument(): string[] {
  return [
    ...Object.values(Reason),
    ...Object.values(ErrorReason),
    ...Object.values(CaptureReason),
    ...Object.values(NoticeCause),
    ...Object.values(WORKLOAD_EVENTS).map((event) => event.reason),
    ...Object.values(Rule),
  ];
}

/** snake_case names of other programs that pages show in code. */
export const FOREIGN_SNAKE_NAMES: Readonly<Record<string, string>> = {
  drain_listeners: "Envoy's admin API",
  bind_port: "Envoy's original_src listener filter",
  node_modules: 'npm',
  restrict_oom_score_adj: "containerd's CRI configuration (the node tier)",
  netns_mounts_under_state_dir: "containerd's CRI configuration (the node tier)",
  // The tcpSocket probes' Envoy bootstrap (src/injection/traffic/tcp-probes.ts): Envoy's names, and the listener's.
  health_check: "Envoy's HTTP filter",
  cluster_min_healthy_percentages: "Envoy's health_check filter",
  tcp_health_check: "Envoy's cluster health check",
  no_traffic_interval: "Envoy's cluster health check",
  tcp_probes: 'the Envoy listener src/injection/traffic/tcp-probes.ts writes',
  use_remote_address: "Envoy's http_connection_manager",
  // The PROXY protocol's part of the per-Pod bootstrap (src/injection/traffic/proxy-protocol.ts).
  upstream_proxy_protocol: "Envoy's transport socket",
  original_src: "Envoy's listener filter (TPROXY interception)",
  inbound_proxy_protocol: 'the Envoy cluster src/injection/traffic/proxy-protocol.ts writes',
  inbound_tproxy: 'the Envoy listener src/injection/traffic/interception.ts writes',
  inbound_tproxy_passthrough: 'the Envoy cluster src/injection/traffic/interception.ts writes',
  inbound_tproxy_blackhole: 'the Envoy cluster src/injection/traffic/interception.ts writes',
};
const FOREIGN_SNAKE_PREFIXES = ['apiserver_', 'certmanager_', 'nodejs_', 'process_'];

/** A snake_case code span is one of our reasons, a name the chart's templates hold, or another program's. */
export function snakeProblems(code: readonly DocCode[]): NameProblem[] {
  const ours = new Set<string>([...Object.values(Reason), ...Object.values(ErrorReason), ...Object.values(CaptureReason), ...Object.values(NoticeCause)]);
  return code
    .filter((item) => item.kind === 'inline' && /^[a-z][a-z0-9]*(_[a-z0-9]+)+$/.test(item.text) && !item.text.startsWith('envoy_injector_'))
    .filter((item) => !ours.has(item.text) && FOREIGN_SNAKE_NAMES[item.text] === undefined && !FOREIGN_SNAKE_PREFIXES.some((prefix) => item.text.startsWith(prefix)))
    .filter((item) => !CHART_TEMPLATES.includes(item.text))
    .map((item) => ({ file: item.file, line: item.line, name: item.text, why: 'not a reason of ours, nor in the chart, nor in FOREIGN_SNAKE_NAMES' }));
}

function lineOf(text: string, index: number | undefined): number {
  return text.slice(0, index ?? 0).split('\n').length;
}
