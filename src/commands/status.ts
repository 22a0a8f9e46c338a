import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { buildFleetReport, describeKind, planRestarts, type FleetReport, type WorkloadReport } from '../fleet/fleet-report.js';
import type { CommandIo } from './io.js';

export const STATUS_HELP = `Usage: envoy-injector status [options]

Which workloads run Pods injected with an outdated template: lists the Pods
(paged), groups them by owning workload (Deployment, StatefulSet, DaemonSet,
CronJob, Job, or the bare Pod) and compares the hash in each Pod's
envoy-injector.io/status with the hash of that template in the live ConfigMap.

Exit code: 0 when every injected Pod is current, 3 when some are outdated,
1 on an error (or a failed restart), 2 on a usage error.

Options:
  -n, --namespace NS          only this namespace (default: all namespaces)
  -l, --selector SELECTOR     only Pods matching this label selector (app=web,tier!=db)
  -o, --output FORMAT         table (default) | json
      --restart               restart the outdated Deployments, StatefulSets and DaemonSets
                              (as kubectl rollout restart); asks first unless --yes
      --dry-run               with --restart: show what would be restarted, change nothing
  -y, --yes                   with --restart: do not ask
      --kubeconfig FILE       the cluster (default: KUBECONFIG; in a Pod, its service account)
      --injector-namespace NS where the injector and its template ConfigMap are (default envoy-injector-system)
      --configmap NAME        the template ConfigMap (default envoy-initializer)
      --excluded-namespaces L comma-separated namespaces the injector is set to skip (beyond kube-*),
                              so their Pods are not reported as missing the sidecar
      --page-size N           Pods (and ReplicaSets, Jobs, Namespaces) per list request (default 500)
  -h, --help
`;

/** Exit code when some injected Pods are outdated: a pipeline can gate on it. */
const EXIT_OUTDATED = 3;

interface StatusSettings {
  readonly namespace: string | undefined;
  readonly labelSelector: string | undefined;
  readonly output: 'table' | 'json';
  readonly restart: boolean;
  readonly dryRun: boolean;
  readonly yes: boolean;
  readonly kubeconfig: string | undefined;
  readonly injectorNamespace: string;
  readonly configMapName: string;
  readonly excludedNamespaces: readonly string[];
  readonly pageSize: number;
}

/** Flags to settings; undefined when --help was asked for. */
function parseStatusArgs(args: readonly string[]): StatusSettings | undefined {
  const { values } = parseArgs({
    args: [...args],
    options: {
      namespace: { type: 'string', short: 'n' },
      selector: { type: 'string', short: 'l' },
      output: { type: 'string', short: 'o', default: 'table' },
      restart: { type: 'boolean', default: false },
      'dry-run': { type: 'boolean', default: false },
      yes: { type: 'boolean', short: 'y', default: false },
      kubeconfig: { type: 'string' },
      'injector-namespace': { type: 'string', default: 'envoy-injector-system' },
      configmap: { type: 'string', default: 'envoy-initializer' },
      'excluded-namespaces': { type: 'string', default: '' },
      'page-size': { type: 'string', default: '500' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) return undefined;
  const output = values.output;
  if (output !== 'table' && output !== 'json') throw new UsageError('--output: must be table or json');
  if (!values.restart && (values['dry-run'] || values.yes)) throw new UsageError('--dry-run and --yes go with --restart');
  const pageSize = Number(values['page-size']);
  if (!/^\d+$/.test(values['page-size']) || pageSize < 1 || pageSize > 10_000) throw new UsageError('--page-size: must be an integer from 1 to 10000');
  return {
    namespace: values.namespace,
    labelSelector: values.selector,
    output,
    restart: values.restart,
    dryRun: values['dry-run'],
    yes: values.yes,
    kubeconfig: values.kubeconfig,
    injectorNamespace: values['injector-namespace'],
    configMapName: values.configmap,
    excludedNamespaces: values['excluded-namespaces'].split(',').map((name) => name.trim()).filter((name) => name !== ''),
    pageSize,
  };
}

interface Ref {
  readonly namespace: string;
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
}

/** What `--restart` did, in the JSON output. */
interface RestartOutcome {
  readonly dryRun: boolean;
  /** The outdated Deployments, StatefulSets and DaemonSets: restarted, or with dryRun what would be. */
  readonly targets: readonly Ref[];
  /** False when the prompt was answered no. */
  readonly confirmed: boolean;
  readonly restartedAt: string | undefined;
  readonly restarted: readonly Ref[];
  readonly failed: readonly (Ref & { readonly error: string })[];
  /** Outdated, but without a Pod template to roll (bare Pods, Jobs, CronJobs, ReplicaSets, other controllers). */
  readonly notRestartable: readonly Ref[];
}

export async function runStatus(args: readonly string[], io: CommandIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const settings = parseStatusArgs(args);
  if (settings === undefined) {
    io.stdout.write(STATUS_HELP);
    return 0;
  }
  const asking = settings.restart && !settings.dryRun && !settings.yes;
  // Refuse before reading the cluster: a pipeline must never hang on a prompt nobody sees.
  if (asking && !isTerminal(io.stdin)) {
    throw new UsageError('--restart asks before restarting, but standard input is not a terminal: add --yes to restart without asking, or --dry-run to see what would be restarted');
  }
  // client-node is large: loaded here, so the offline commands never pay for it.
  const { connectToCluster } = await import('../kube/cluster-connection.js');
  const { readFleet, restartWorkload, RESTARTED_AT_ANNOTATION } = await import('../kube/fleet-status.js');
  // The cluster is found as serve finds it: --kubeconfig, KUBECONFIG, or the Pod's service account.
  const connection = connectToCluster({ kubeconfig: settings.kubeconfig, env });
  if (connection === undefined) throw new UsageError('status reads a cluster: pass --kubeconfig FILE or set KUBECONFIG (in a Pod, its service account is used)');

  const snapshot = await readFleet(connection.kubeConfig, settings);
  for (const what of snapshot.inconsistentLists) {
    io.stderr.write(`envoy-injector: note: ${what} outlasted the API server's history (410 Gone); the rest was listed as it is now, so objects changed meanwhile may be missing\n`);
  }
  const forbidden = snapshot.namespaceLabelsForbidden;
  if (forbidden !== undefined) {
    const what = forbidden.namespace === undefined ? 'list namespaces' : `get namespace ${forbidden.namespace}`;
    io.stderr.write(`envoy-injector: note: no permission to ${what} (${forbidden.message}): its labels are unknown, so Pods there without the sidecar are counted as unknown\n`);
  }
  const report = buildFleetReport({
    pods: snapshot.pods,
    owners: snapshot.owners,
    templates: snapshot.templates,
    namespaceLabels: (namespace) => snapshot.namespaceLabels.get(namespace),
    namespaceLabelsUnreadable: (namespace) => forbidden !== undefined && (forbidden.namespace === undefined || forbidden.namespace === namespace),
    decision: { excludedNamespaces: settings.excludedNamespaces, injectorNamespace: settings.injectorNamespace },
  });
  const scope = settings.namespace === undefined ? 'all namespaces' : `namespace ${settings.namespace}`;
  const exitCode = report.totals.outdated > 0 ? EXIT_OUTDATED : 0;
  const json = settings.output === 'json';
  if (!json) io.stdout.write(formatReport(report, snapshot.templateSource, scope, !settings.restart));
  if (!settings.restart) {
    if (json) io.stdout.write(JSON.stringify({ source: snapshot.templateSource, ...report }, null, 2) + '\n');
    return exitCode;
  }

  const plan = planRestarts(report);
  const notRestartable = plan.byHand.map(toRef);
  const targets = plan.restart.map(toRef);
  let confirmed = true;
  if (targets.length > 0 && asking) {
    // On stderr when stdout carries JSON, as the question itself always is.
    (json ? io.stderr : io.stdout).write(`\nRestart ${describeCount(targets.length, 'workload')} (as kubectl rollout restart):\n${targets.map((ref) => `  ${describeRef(ref)}\n`).join('')}`);
    confirmed = await confirm(io, `Restart ${targets.length === 1 ? 'it' : 'them'}? [y/N] `);
  }
  const restartedAt = settings.dryRun || !confirmed || targets.length === 0 ? undefined : new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const restarted: Ref[] = [];
  const failed: (Ref & { error: string })[] = [];
  if (restartedAt !== undefined) {
    for (const ref of targets) {
      try {
        await restartWorkload(connection.kubeConfig, ref, restartedAt);
        restarted.push(ref);
      } catch (error) {
        failed.push({ ...ref, error: error instanceof Error ? error.message : String(error) });
      }
    }
  }
  const outcome: RestartOutcome = { dryRun: settings.dryRun, targets, confirmed, restartedAt, restarted, failed, notRestartable };
  if (json) io.stdout.write(JSON.stringify({ source: snapshot.templateSource, ...report, restart: outcome }, null, 2) + '\n');
  else io.stdout.write(formatRestart(outcome, RESTARTED_AT_ANNOTATION));
  return failed.length > 0 ? 1 : exitCode;
}

/** The table: one row per workload, then the totals and what to do about outdated Pods. */
function formatReport(report: FleetReport, source: string, scope: string, withHint: boolean): string {
  const lines = [`Templates in ${source}:`, ...formatColumns(report.templates.map((template) => [`  ${template.name}`, template.hash])), ''];
  if (report.workloads.length === 0) {
    lines.push(`No injected Pods, and none missing the sidecar, in ${scope}.`);
    return lines.join('\n') + '\n';
  }
  const { totals } = report;
  // UNKNOWN only when some namespace's labels could not be read: the usual table stays as it was.
  const withUnknown = totals.unknown > 0;
  const header = ['NAMESPACE', 'WORKLOAD', 'TEMPLATE', 'CURRENT', 'OUTDATED', 'NOT-INJECTED', ...(withUnknown ? ['UNKNOWN'] : []), 'OUTDATED-HASHES'];
  const rows = report.workloads.map((workload) => [
    workload.namespace,
    `${describeKind(workload)}/${workload.name}`,
    workload.templates.join(',') || '-',
    String(workload.current),
    String(workload.outdated),
    String(workload.notInjected),
    ...(withUnknown ? [String(workload.unknown)] : []),
    workload.outdatedHashes.map((entry) => `${entry.template}@${entry.hash} (${entry.pods})`).join(', ') || '-',
  ]);
  lines.push(...formatColumns([header, ...rows]), '');
  const unknown = withUnknown ? `, ${totals.unknown} unknown (namespace labels not readable)` : '';
  lines.push(
    `${describeCount(totals.pods, 'Pod')} in ${describeCount(report.workloads.length, 'workload')} (${scope}): ${totals.current} current, ${totals.outdated} outdated, ${totals.notInjected} not injected${unknown}.`,
  );
  if (withHint && totals.outdated > 0) {
    const plan = planRestarts(report);
    if (plan.restart.length > 0) lines.push(`--restart would restart: ${plan.restart.map(describeRef).join(', ')}.`);
    if (plan.byHand.length > 0) lines.push(`Recreate by hand (no Pod template to roll): ${plan.byHand.map(describeRef).join(', ')}.`);
  }
  return lines.join('\n') + '\n';
}

function formatRestart(outcome: RestartOutcome, annotation: string): string {
  const { targets } = outcome;
  const lines = [''];
  if (targets.length === 0) lines.push('Nothing to restart: no outdated Deployment, StatefulSet or DaemonSet.');
  else if (outcome.dryRun) lines.push(`Dry run, nothing changed. --restart would set ${annotation} on the Pod template of:`, ...targets.map((ref) => `  ${describeRef(ref)}`));
  else if (!outcome.confirmed) lines.push('Not confirmed: nothing restarted.');
  else {
    lines.push(`Set ${annotation}=${outcome.restartedAt ?? ''} on:`);
    lines.push(...outcome.restarted.map((ref) => `  restarted ${describeRef(ref)}`));
    lines.push(...outcome.failed.map((ref) => `  FAILED    ${describeRef(ref)}: ${ref.error}`));
  }
  if (outcome.notRestartable.length > 0) lines.push(`Not restarted (no Pod template to roll; recreate them by hand): ${outcome.notRestartable.map(describeRef).join(', ')}.`);
  return lines.join('\n') + '\n';
}

/** Left-aligned columns two spaces apart, no trailing blanks. */
function formatColumns(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, index) => (widths[index] = Math.max(widths[index] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, index) => (index === row.length - 1 ? cell : cell.padEnd(widths[index] ?? 0))).join('  '));
}

function toRef(workload: WorkloadReport): Ref {
  return { namespace: workload.namespace, apiVersion: workload.apiVersion, kind: workload.kind, name: workload.name };
}

function describeRef(ref: Ref): string {
  return `${describeKind(ref)} ${ref.namespace}/${ref.name}`;
}

function describeCount(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

function isTerminal(stream: NodeJS.ReadableStream): boolean {
  return (stream as { isTTY?: unknown }).isTTY === true;
}

/** One line from stdin; yes only for y or yes. End of input counts as no. */
async function confirm(io: CommandIo, question: string): Promise<boolean> {
  io.stderr.write(question);
  const lines = createInterface({ input: io.stdin, terminal: false });
  try {
    const answer = await new Promise<string>((resolve) => {
      lines.once('line', resolve);
      lines.once('close', () => resolve(''));
    });
    return /^\s*(y|yes)\s*$/i.test(answer);
  } finally {
    lines.close();
  }
}
