import { createInterface } from 'node:readline';
import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import type { DecisionOptions } from '../injection/index.js';
import { buildFleetReport, namespaceTemplates } from '../fleet/fleet-report.js';
import { planRestarts, restartCandidates } from '../fleet/restart-plan.js';
import { describeCount, describeRef, formatReport, formatRestart, toNotRestartedRef, toRef, type Ref, type RestartOutcome } from './status-format.js';
import type { CommandIo } from './io.js';
import { parseInteger, parseSelectorsOption } from './options.js';

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
Pod, is counted apart (COPIED), with the marks to remove.

Exit code: 0 when every injected Pod is current, 3 when some are outdated or
carry copied marks, 1 on an error (or a failed restart), 2 on a usage error.

Options:
  -n, --namespace NS          only this namespace (default: all namespaces)
  -l, --selector SELECTOR     only Pods matching this label selector (app=web,tier!=db)
  -o, --output FORMAT         table (default) | json
      --restart               restart the outdated Deployments, StatefulSets and DaemonSets, and those
                              whose copied marks are gone from the Pod template
                              (as kubectl rollout restart); asks first unless --yes
      --dry-run               with --restart: show what would be restarted, change nothing
      --force                 with --restart: restart a workload whose rollout is still in progress
                              (skipped by default: a restart would start that rollout over)
  -y, --yes                   with --restart: do not ask
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
  if (!values.restart && (values['dry-run'] || values.yes || values.force)) throw new UsageError('--dry-run, --yes and --force go with --restart');
  const pageSize = parseInteger(values['page-size'], '--page-size', 1, 10_000);
  return {
    namespace: values.namespace,
    labelSelector: values.selector,
    output,
    restart: values.restart,
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
  const asking = settings.restart && !settings.dryRun && !settings.yes;
  // Refuse before reading the cluster: a pipeline must never hang on a prompt nobody sees.
  if (asking && !isTerminal(io.stdin)) {
    throw new UsageError('--restart asks before restarting, but standard input is not a terminal: add --yes to restart without asking, or --dry-run to see what would be restarted');
  }
  // client-node is large: loaded here, so the offline commands never pay for it.
  const { connectToCluster } = await import('../kube/api/index.js');
  const { readFleet, restartWorkload, RESTARTED_AT_ANNOTATION } = await import('../kube/fleet-status.js');
  const { readWorkloadObjects } = await import('../kube/workload-objects.js');
  // The cluster is found as serve finds it: --kubeconfig, KUBECONFIG, or the Pod's service account.
  const connection = connectToCluster({ kubeconfig: settings.kubeconfig, env });
  if (connection === undefined) throw new UsageError('status reads a cluster: pass --kubeconfig FILE or set KUBECONFIG (in a Pod, its service account is used)');

  const noteInconsistent = (what: string): void => {
    io.stderr.write(`envoy-injector: note: ${what} outlasted the API server's history (410 Gone); the rest was listed as it is now, so objects changed meanwhile may be missing\n`);
  };
  const snapshot = await readFleet(connection.kubeConfig, settings);
  for (const what of snapshot.inconsistentLists) noteInconsistent(what);
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
    decision: settings.decision,
  });
  const picked = namespaceTemplates(snapshot.namespaceLabels, snapshot.templates);
  const scope = settings.namespace === undefined ? 'all namespaces' : `namespace ${settings.namespace}`;
  const exitCode = report.totals.outdated > 0 || report.totals.copied > 0 ? EXIT_OUTDATED : 0;
  const json = settings.output === 'json';
  // The outdated apps/v1 workloads as they are now: OnDelete, a rollout under way, a copied status.
  const objects = await readWorkloadObjects(connection.kubeConfig, settings, restartCandidates(report), noteInconsistent);
  const plan = planRestarts(report, objects, { force: settings.force });
  if (!json) io.stdout.write(formatReport(report, plan, snapshot.templateSource, scope, !settings.restart, picked));
  if (!settings.restart) {
    if (json) io.stdout.write(JSON.stringify({ source: snapshot.templateSource, ...report, namespaceTemplates: picked }, null, 2) + '\n');
    return exitCode;
  }

  const notRestartable = plan.byHand.map(toNotRestartedRef);
  const skipped = plan.inProgress.map(toNotRestartedRef);
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
  const outcome: RestartOutcome = { dryRun: settings.dryRun, targets, confirmed, restartedAt, restarted, failed, notRestartable, skipped };
  if (json) io.stdout.write(JSON.stringify({ source: snapshot.templateSource, ...report, namespaceTemplates: picked, restart: outcome }, null, 2) + '\n');
  else io.stdout.write(formatRestart(outcome, RESTARTED_AT_ANNOTATION));
  return failed.length > 0 ? 1 : exitCode;
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
