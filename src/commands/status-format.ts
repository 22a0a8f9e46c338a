import { Annotations, InjectedLabel } from '../injection/index.js';
import { CopiedMark, describeKind, type FleetReport, type NamespaceTemplate, type WorkloadReport } from '../fleet/fleet-report.js';
import type { NotRestarted, RestartPlan } from '../fleet/restart-plan.js';

/** A workload as the JSON output names it. */
export interface Ref {
  readonly namespace: string;
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
}

/** A workload `--restart` leaves alone, and why. */
export type NotRestartedRef = Ref & { readonly why: string; readonly detail?: string };

/** What `--restart` did, in the JSON output. */
export interface RestartOutcome {
  readonly dryRun: boolean;
  /** The outdated Deployments, StatefulSets and DaemonSets to roll: restarted, or with dryRun what would be. */
  readonly targets: readonly Ref[];
  /** False when the prompt was answered no. */
  readonly confirmed: boolean;
  readonly restartedAt: string | undefined;
  readonly restarted: readonly Ref[];
  readonly failed: readonly (Ref & { readonly error: string })[];
  /** Outdated, and never rolled by --restart: bare Pods, Jobs, CronJobs, ReplicaSets, other groups, OnDelete, a copied status. */
  readonly notRestartable: readonly NotRestartedRef[];
  /** Outdated, but their rollout is still in progress: a restart now would start it over (--force does). */
  readonly skipped: readonly NotRestartedRef[];
}

/** The table: one row per workload, then the totals and what to do about outdated Pods. */
export function formatReport(report: FleetReport, plan: RestartPlan, source: string, scope: string, withHint: boolean, picked: readonly NamespaceTemplate[] = []): string {
  const lines = [`Templates in ${source}:`, ...formatColumns(report.templates.map((template) => [`  ${template.name}`, template.hash])), ''];
  if (picked.length > 0) {
    lines.push('Namespaces picking a template (label envoy-injector.io/template):');
    lines.push(...formatColumns(picked.map((entry) => [`  ${entry.namespace}`, entry.known ? entry.template : `${entry.template} (no such template: its Pods are not injected)`])), '');
  }
  if (report.workloads.length === 0) {
    lines.push(`No injected Pods, and none missing the sidecar, in ${scope}.`);
    return lines.join('\n') + '\n';
  }
  const { totals } = report;
  // UNKNOWN only when some namespace's labels could not be read, COPIED only when some Pod carries copied marks: the usual table stays as it was.
  const withUnknown = totals.unknown > 0;
  const withCopied = totals.copied > 0;
  const header = ['NAMESPACE', 'WORKLOAD', 'TEMPLATE', 'CURRENT', 'OUTDATED', 'NOT-INJECTED', ...(withUnknown ? ['UNKNOWN'] : []), ...(withCopied ? ['COPIED'] : []), 'OUTDATED-HASHES'];
  const rows = report.workloads.map((workload) => [
    workload.namespace,
    `${describeKind(workload)}/${workload.name}`,
    workload.templates.join(',') || '-',
    String(workload.current),
    String(workload.outdated),
    String(workload.notInjected),
    ...(withUnknown ? [String(workload.unknown)] : []),
    ...(withCopied ? [String(workload.copied)] : []),
    workload.outdatedHashes.map((entry) => `${entry.template}@${entry.hash} (${entry.pods})`).join(', ') || '-',
  ]);
  lines.push(...formatColumns([header, ...rows]), '');
  const unknown = withUnknown ? `, ${totals.unknown} unknown (namespace labels not readable)` : '';
  const copied = withCopied ? `, ${totals.copied} with copied marks (no sidecar)` : '';
  // Said only when some Pod has them: the proxy answers their tcpSocket probes (docs/capture.md).
  const probes = totals.tcpProbes > 0 ? `, ${totals.tcpProbes} with tcpSocket probes answered by the proxy` : '';
  const withHeader = totals.proxyProtocol > 0 ? `, ${totals.proxyProtocol} with the PROXY protocol to the app` : '';
  const withTproxy = totals.tproxy > 0 ? `, ${totals.tproxy} captured by TPROXY (proxy as root with NET_ADMIN)` : '';
  lines.push(
    `${describeCount(totals.pods, 'Pod')} in ${describeCount(report.workloads.length, 'workload')} (${scope}): ${totals.current} current, ${totals.outdated} outdated, ${totals.notInjected} not injected${unknown}${copied}${probes}${withHeader}${withTproxy}.`,
  );
  const marked = report.workloads.filter((workload) => workload.copied > 0);
  if (marked.length > 0) {
    const which = marked.map((workload) => `${describeRef(workload)} (${workload.copiedMarks.map(describeMark).join(', ')})`).join(', ');
    lines.push(`Copied marks, no sidecar: ${which}. Remove them from the Pod template (kubectl edit): its Pods are then replaced, injected.`);
  }
  if (withHint && (totals.outdated > 0 || totals.copied > 0)) {
    if (plan.restart.length > 0) lines.push(`--restart would restart: ${plan.restart.map(describeRef).join(', ')}.`);
    lines.push(...byWhy(plan.byHand.map(toNotRestartedRef)).map(([why, refs]) => `Recreate by hand (${why}): ${refs}.`));
    if (plan.inProgress.length > 0) lines.push(`--restart would skip, rollout in progress (--force restarts them anyway): ${describeNotRestarted(plan.inProgress.map(toNotRestartedRef))}.`);
  }
  return lines.join('\n') + '\n';
}

export function formatRestart(outcome: RestartOutcome, annotation: string): string {
  const { targets } = outcome;
  const lines = [''];
  if (targets.length === 0) lines.push('Nothing to restart: no outdated Deployment, StatefulSet or DaemonSet that a restart would roll.');
  else if (outcome.dryRun) lines.push(`Dry run, nothing changed. --restart would set ${annotation} on the Pod template of:`, ...targets.map((ref) => `  ${describeRef(ref)}`));
  else if (!outcome.confirmed) lines.push('Not confirmed: nothing restarted.');
  else {
    lines.push(`Set ${annotation}=${outcome.restartedAt ?? ''} on:`);
    lines.push(...outcome.restarted.map((ref) => `  restarted ${describeRef(ref)}`));
    lines.push(...outcome.failed.map((ref) => `  FAILED    ${describeRef(ref)}: ${ref.error}`));
  }
  if (outcome.skipped.length > 0) lines.push(`Skipped, rollout in progress (--force restarts them anyway): ${describeNotRestarted(outcome.skipped)}.`);
  lines.push(...byWhy(outcome.notRestartable).map(([why, refs]) => `Not restarted (${why}; recreate them by hand): ${refs}.`));
  return lines.join('\n') + '\n';
}

/** A copied mark as the fix names it. */
function describeMark(mark: CopiedMark): string {
  return mark === CopiedMark.statusAnnotation ? `annotation ${Annotations.status}` : `label ${InjectedLabel.key}`;
}

/** One entry per why, in the order first seen, with its workloads listed. */
function byWhy(refs: readonly NotRestartedRef[]): [string, string][] {
  const groups = new Map<string, NotRestartedRef[]>();
  for (const ref of refs) groups.set(ref.why, [...(groups.get(ref.why) ?? []), ref]);
  return [...groups].map(([why, members]) => [why, describeNotRestarted(members)]);
}

function describeNotRestarted(refs: readonly NotRestartedRef[]): string {
  return refs.map((ref) => `${describeRef(ref)}${ref.detail === undefined ? '' : ` (${ref.detail})`}`).join(', ');
}

/** Left-aligned columns two spaces apart, no trailing blanks. */
function formatColumns(rows: readonly (readonly string[])[]): string[] {
  const widths: number[] = [];
  for (const row of rows) row.forEach((cell, index) => (widths[index] = Math.max(widths[index] ?? 0, cell.length)));
  return rows.map((row) => row.map((cell, index) => (index === row.length - 1 ? cell : cell.padEnd(widths[index] ?? 0))).join('  '));
}

export function toRef(workload: WorkloadReport): Ref {
  return { namespace: workload.namespace, apiVersion: workload.apiVersion, kind: workload.kind, name: workload.name };
}

export function toNotRestartedRef(entry: NotRestarted): NotRestartedRef {
  return { ...toRef(entry.workload), why: entry.why, ...(entry.detail === undefined ? {} : { detail: entry.detail }) };
}

export function describeRef(ref: Ref): string {
  return `${describeKind(ref)} ${ref.namespace}/${ref.name}`;
}

export function describeCount(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}
