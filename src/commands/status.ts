import { createInterface } from 'node:readline';
import type { KubeConfig } from '@kubernetes/client-node';
import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { Annotations, DEFAULT_ALLOWED_OVERRIDES, type DecisionOptions, type OverrideName } from '../injection/index.js';
import { buildFleetReport, namespaceTemplates, type FleetInput, type FleetReport, type PodRecord } from '../fleet/fleet-report.js';
import { planRestarts, restartCandidates, type RestartPlan } from '../fleet/restart-plan.js';
import { describeCount, describeRef, formatReport, formatRestart, toNotRestartedRef, toRef, type Ref, type RestartOutcome } from './status-format.js';
import type { CommandIo } from './io.js';
import { parseAllowedOverrides, parseInteger, parseSelectorsOption } from './options.js';
import { formatResize, pendingLines, pendingResizes, planResizes, resizableLine, runResizes, type ResizeOutcome } from './status-resize.js';

export const STATUS_HELP = `Usage: envoy-injector status [options]

Which workloads run Pods injected with an outdated template: lists the Pods
(paged), groups them by owning workload (Deployment, StatefulSet, DaemonSet,
CronJob, Job, or the bare Pod) and compares the hash in each Pod's
envoy-injector.io/status with the hash of that template in the live ConfigMap.
A Pod injected with another template than the one it would get now (its
namespace's envoy-injector.io/template label picks another) is outdated too;
the namespaces that pick a template are listed. A Pod without the sidecar
that carries our marks (a status naming containers it lacks, or the label
envoy-injector.io/injected), copied into its Pod template from an injected
Pod, is counted apart (COPIED), with the marks to remove. Outdated Pods whose
sidecars differ from the live template only in CPU and memory (the status's
hashWithoutResources is the template's) are counted resizable: --resize
resizes them in place through the Pod's resize subresource (Kubernetes
1.33+) and records the template in their status. Pods whose last resize the
kubelet has not applied (PodResizePending: Infeasible, Deferred;
PodResizeInProgress) are listed.

Exit code: 0 when every injected Pod is current, 3 when some are outdated,
carry copied marks or wait for a resize, 1 on an error (or a failed restart
or resize), 2 on a usage error.

Options:
  -n, --namespace NS          only this namespace (default: all namespaces)
  -l, --selector SELECTOR     only Pods matching this label selector (app=web,tier!=db)
  -o, --output FORMAT         table (default) | json
      --restart               restart the outdated Deployments, StatefulSets and DaemonSets, and those
                              whose copied marks are gone from the Pod template
                              (as kubectl rollout restart); asks first unless --yes
      --resize                resize in place the Pods that differ only in CPU and memory (pods/resize),
                              then record the live template in their status; asks first unless --yes
      --allowed-overrides L   with --resize: the proxy-* annotations the injector is set to allow
                              (serve's --allowed-overrides; default proxy-cpu,proxy-memory,
                              proxy-cpu-limit,proxy-memory-limit): they keep their values
      --dry-run               with --restart or --resize: show what would be done, change nothing
      --force                 with --restart: restart a workload whose rollout is still in progress
                              (skipped by default: a restart would start that rollout over)
  -y, --yes                   with --restart or --resize: do not ask
      --kubeconfig FILE       the cluster (default: KUBECONFIG; in a Pod, its service account)
      --injector-namespace NS where the injector and its template ConfigMap are (default envoy-injector-system)
      --configmap NAME        the template ConfigMap (default envoy-initializer)
      --excluded-namespaces L comma-separated namespaces the injector is set to skip (beyond kube-*),
                              so their Pods are not reported as missing the sidecar
      --never-inject-selector JSON   the injector's central selectors, as serve, explain and policy take
      --always-inject-selector JSON  them (a JSON list of {matchLabels, matchExpressions}): each Pod's
                              labels then decide whether it should have the sidecar, as the webhook's do
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
  readonly resize: boolean;
  /** The server's --allowed-overrides: a resize keeps the overrides injection applied. */
  readonly allowedOverrides: readonly OverrideName[];
  readonly dryRun: boolean;
  readonly yes: boolean;
  readonly force: boolean;
  readonly kubeconfig: string | undefined;
  readonly injectorNamespace: string;
  readonly configMapName: string;
  /** What the webhook is set to: excluded namespaces, the central selectors (as serve's flags). */
  readonly decision: DecisionOptions;
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
      resize: { type: 'boolean', default: false },
      'allowed-overrides': { type: 'string', default: DEFAULT_ALLOWED_OVERRIDES.join(',') },
      'dry-run': { type: 'boolean', default: false },
      yes: { type: 'boolean', short: 'y', default: false },
      force: { type: 'boolean', default: false },
      kubeconfig: { type: 'string' },
      'injector-namespace': { type: 'string', default: 'envoy-injector-system' },
      configmap: { type: 'string', default: 'envoy-initializer' },
      'excluded-namespaces': { type: 'string', default: '' },
      'never-inject-selector': { type: 'string' },
      'always-inject-selector': { type: 'string' },
      'page-size': { type: 'string', default: '500' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) return undefined;
  const output = values.output;
  if (output !== 'table' && output !== 'json') throw new UsageError('--output: must be table or json');
  const usage = '--dry-run, --yes and --force go with --restart (--dry-run and --yes with --resize too)';
  if (!values.restart && (values.force || (!values.resize && (values['dry-run'] || values.yes)))) throw new UsageError(usage);
  const pageSize = parseInteger(values['page-size'], '--page-size', 1, 10_000);
  return {
    namespace: values.namespace,
    labelSelector: values.selector,
    output,
    restart: values.restart,
    resize: values.resize,
    allowedOverrides: parseAllowedOverrides(values['allowed-overrides']),
    dryRun: values['dry-run'],
    yes: values.yes,
    force: values.force,
    kubeconfig: values.kubeconfig,
    injectorNamespace: values['injector-namespace'],
    configMapName: values.configmap,
    decision: {
      excludedNamespaces: values['excluded-namespaces'].split(',').map((name) => name.trim()).filter((name) => name !== ''),
      injectorNamespace: values['injector-namespace'],
      neverInjectSelectors: parseSelectorsOption('--never-inject-selector', values['never-inject-selector']),
      alwaysInjectSelectors: parseSelectorsOption('--always-inject-selector', values['always-inject-selector']),
    },
    pageSize,
  };
}

export async function runStatus(args: readonly string[], io: CommandIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const settings = parseStatusArgs(args);
  if (settings === undefined) {
    io.stdout.write(STATUS_HELP);
    return 0;
  }
  const asking = (settings.restart || settings.resize) && !settings.dryRun && !settings.yes;
  // Refuse before reading the cluster: a pipeline must never hang on a prompt nobody sees.
  if (asking && !isTerminal(io.stdin)) {
    if (settings.restart) throw new UsageError('--restart asks before restarting, but standard input is not a terminal: add --yes to restart without asking, or --dry-run to see what would be restarted');
    throw new UsageError('--resize asks before resizing, but standard input is not a terminal: add --yes to resize without asking, or --dry-run to see what would be resized');
  }
  // client-node is large: loaded here, so the offline commands never pay for it.
  const { connectToCluster } = await import('../kube/api/index.js');
  // The cluster is found as serve finds it: --kubeconfig, KUBECONFIG, or the Pod's service account.
  const connection = connectToCluster({ kubeconfig: settings.kubeconfig, env });
  if (connection === undefined) throw new UsageError('status reads a cluster: pass --kubeconfig FILE or set KUBECONFIG (in a Pod, its service account is used)');
  const seen = await readAndReport(connection.kubeConfig, settings, io);
  const json = settings.output === 'json';
  const base = { source: seen.templateSource, ...seen.report, namespaceTemplates: seen.picked, resizeServed: seen.served, resizePending: seen.pending };
  if (!settings.restart && !settings.resize) {
    if (json) io.stdout.write(JSON.stringify(base, null, 2) + '\n');
    return seen.exitCode;
  }
  // One question for both steps: asked by the first that has something to do, only when asking.
  let confirmed: boolean | undefined = asking ? undefined : true;
  const ask = async (question: string, what: string): Promise<boolean> => {
    if (confirmed === undefined) {
      (json ? io.stderr : io.stdout).write(what);
      confirmed = await confirm(io, question);
    }
    return confirmed;
  };
  const resized = settings.resize ? await resizeStep(connection.kubeConfig, settings, seen, ask) : undefined;
  // Resized Pods count as current: --restart then rolls only what is still outdated.
  const after = resized === undefined || resized.outcome.resized.length === 0 || settings.dryRun || !resized.outcome.confirmed ? seen.report : buildFleetReport({ ...seen.input, pods: resized.pods });
  const restarted = settings.restart ? await restartStep(connection.kubeConfig, settings, after === seen.report ? seen.plan : after, io, ask) : undefined;
  if (json) io.stdout.write(JSON.stringify({ ...base, ...(restarted === undefined ? {} : { restart: restarted }), ...(resized === undefined ? {} : { resize: resized.outcome }) }, null, 2) + '\n');
  else {
    if (resized !== undefined) io.stdout.write(formatResize(resized.outcome));
    if (restarted !== undefined) io.stdout.write(formatRestart(restarted, (await import('../kube/fleet-status.js')).RESTARTED_AT_ANNOTATION));
  }
  const failed = (restarted?.failed.length ?? 0) + (resized?.outcome.failed.length ?? 0);
  const stillOutdated = after.totals.outdated > 0 || after.totals.copied > 0 || seen.pending.length > 0 || (resized?.outcome.pending.length ?? 0) > 0;
  return failed > 0 ? 1 : stillOutdated ? EXIT_OUTDATED : 0;
}

/** What `status` read and reported: the report, whether the API server resizes, the Pods whose resize waits. */
interface Seen {
  readonly input: FleetInput;
  readonly report: FleetReport;
  readonly templateSource: string;
  readonly picked: ReturnType<typeof namespaceTemplates>;
  readonly pods: readonly PodRecord[];
  readonly namespaceAnnotations: ReadonlyMap<string, Readonly<Record<string, string>>>;
  /** Whether the API server serves `pods/resize`; undefined when not asked (no Pod to resize, no --resize). */
  readonly served: boolean | undefined;
  readonly pending: ReturnType<typeof pendingResizes>;
  readonly exitCode: number;
  /** The restart plan over the report, with the outdated workloads as they are now. */
  readonly plan: RestartPlan;
}

/** Reads the fleet, prints the table (not the JSON: the caller adds what it did), and says what it saw. */
async function readAndReport(kubeConfig: KubeConfig, settings: StatusSettings, io: CommandIo): Promise<Seen> {
  const { readFleet } = await import('../kube/fleet-status.js');
  const { resizeServed } = await import('../kube/pod-resize.js');
  const snapshot = await readFleet(kubeConfig, settings);
  for (const what of snapshot.inconsistentLists) noteInconsistent(io)(what);
  const forbidden = snapshot.namespaceLabelsForbidden;
  if (forbidden !== undefined) {
    const what = forbidden.namespace === undefined ? 'list namespaces' : `get namespace ${forbidden.namespace}`;
    io.stderr.write(`envoy-injector: note: no permission to ${what} (${forbidden.message}): its labels are unknown, so Pods there without the sidecar are counted as unknown\n`);
  }
  const input: FleetInput = {
    pods: snapshot.pods,
    owners: snapshot.owners,
    templates: snapshot.templates,
    namespaceLabels: (namespace) => snapshot.namespaceLabels.get(namespace),
    namespaceLabelsUnreadable: (namespace) => forbidden !== undefined && (forbidden.namespace === undefined || forbidden.namespace === namespace),
    decision: settings.decision,
  };
  const report = buildFleetReport(input);
  const picked = namespaceTemplates(snapshot.namespaceLabels, snapshot.templates);
  // Discovery only when it matters: a Pod to resize, or --resize asked.
  const served = report.totals.resizable > 0 || settings.resize ? await resizeServed(kubeConfig) : undefined;
  const pending = pendingResizes(snapshot.pods);
  const exitCode = report.totals.outdated > 0 || report.totals.copied > 0 || pending.length > 0 ? EXIT_OUTDATED : 0;
  const plan = await restartPlan(kubeConfig, settings, report, io);
  if (settings.output !== 'json') {
    const scope = settings.namespace === undefined ? 'all namespaces' : `namespace ${settings.namespace}`;
    const extra = [resizableLine(report.totals.resizable, served !== false), ...pendingLines(pending)].filter((line): line is string => line !== undefined);
    io.stdout.write(formatReport(report, plan, snapshot.templateSource, scope, !settings.restart, picked) + extra.map((line) => `${line}\n`).join(''));
  }
  return { input, report, templateSource: snapshot.templateSource, picked, pods: snapshot.pods, namespaceAnnotations: snapshot.namespaceAnnotations, served, pending, exitCode, plan };
}

function noteInconsistent(io: CommandIo): (what: string) => void {
  return (what) => io.stderr.write(`envoy-injector: note: ${what} outlasted the API server's history (410 Gone); the rest was listed as it is now, so objects changed meanwhile may be missing\n`);
}

/** The restart plan over REPORT: the outdated apps/v1 workloads read as they are now (OnDelete, a rollout under way, a copied status). */
async function restartPlan(kubeConfig: KubeConfig, settings: StatusSettings, report: FleetReport, io: CommandIo): Promise<RestartPlan> {
  const { readWorkloadObjects } = await import('../kube/workload-objects.js');
  const objects = await readWorkloadObjects(kubeConfig, settings, restartCandidates(report), noteInconsistent(io));
  return planRestarts(report, objects, { force: settings.force });
}

/** `--resize`: plans, asks, resizes; the Pods as they are after it (resized ones with their new status), for --restart. */
async function resizeStep(kubeConfig: KubeConfig, settings: StatusSettings, seen: Seen, ask: (question: string, what: string) => Promise<boolean>): Promise<{ outcome: ResizeOutcome; pods: readonly PodRecord[] }> {
  const { RESIZE_CONCURRENCY } = await import('../kube/pod-resize.js');
  const served = seen.served === true;
  const planning = planResizes(seen.pods, seen.input, { served, allowedOverrides: settings.allowedOverrides, namespaceAnnotations: (namespace) => seen.namespaceAnnotations.get(namespace) });
  const wouldResize = planning.targets.map((target) => ({ namespace: target.namespace, name: target.name, changes: target.plan.changes, restartsContainers: target.plan.restartsContainers }));
  const base = { served, dryRun: settings.dryRun, notResized: planning.notResized, skipped: [], pending: planning.pending, failed: [] };
  if (settings.dryRun || planning.targets.length === 0) return { outcome: { ...base, confirmed: true, resized: wouldResize }, pods: seen.pods };
  const what = `\nResize ${describeCount(planning.targets.length, 'Pod')} in place (pods/resize), then record the live template in their status.\n`;
  if (!(await ask(`Resize ${planning.targets.length === 1 ? 'it' : 'them'}? [y/N] `, what))) return { outcome: { ...base, confirmed: false, resized: wouldResize }, pods: seen.pods };
  const done = await runResizes(kubeConfig, planning, RESIZE_CONCURRENCY);
  const statusOf = new Map(planning.targets.map((target) => [`${target.namespace}/${target.name}`, target.plan.status]));
  const resizedKeys = new Set(done.resized.map((entry) => `${entry.namespace}/${entry.name}`));
  const pods = seen.pods.map((pod) => {
    const key = `${pod.namespace}/${pod.name}`;
    const status = statusOf.get(key);
    return status === undefined || !resizedKeys.has(key) ? pod : { ...pod, annotations: { ...pod.annotations, [Annotations.status]: status } };
  });
  return { outcome: { served, dryRun: false, confirmed: true, ...done }, pods };
}

/** `--restart`: the plan (or one over REPORT, after a resize), asked, applied. */
async function restartStep(kubeConfig: KubeConfig, settings: StatusSettings, planned: RestartPlan | FleetReport, io: CommandIo, ask: (question: string, what: string) => Promise<boolean>): Promise<RestartOutcome> {
  const { restartWorkload } = await import('../kube/fleet-status.js');
  const plan = 'restart' in planned ? planned : await restartPlan(kubeConfig, settings, planned, io);
  const notRestartable = plan.byHand.map(toNotRestartedRef);
  const skipped = plan.inProgress.map(toNotRestartedRef);
  const targets = plan.restart.map(toRef);
  let confirmed = true;
  if (targets.length > 0 && !settings.dryRun) {
    // On stderr when stdout carries JSON, as the question itself always is.
    const what = `\nRestart ${describeCount(targets.length, 'workload')} (as kubectl rollout restart):\n${targets.map((ref) => `  ${describeRef(ref)}\n`).join('')}`;
    confirmed = await ask(`Restart ${targets.length === 1 ? 'it' : 'them'}? [y/N] `, what);
  }
  const restartedAt = settings.dryRun || !confirmed || targets.length === 0 ? undefined : new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const restarted: Ref[] = [];
  const failed: (Ref & { error: string })[] = [];
  if (restartedAt !== undefined) {
    for (const ref of targets) {
      try {
        await restartWorkload(kubeConfig, ref, restartedAt);
        restarted.push(ref);
      } catch (error) {
        failed.push({ ...ref, error: error instanceof Error ? error.message : String(error) });
      }
    }
  }
  return { dryRun: settings.dryRun, targets, confirmed, restartedAt, restarted, failed, notRestartable, skipped };
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
