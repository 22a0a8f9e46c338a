import { Annotations, InjectedLabel, isJsonObject, objectAt, own, stringAt, type JsonObject } from '../injection/index.js';
import { apiGroup, ownerKey, RESTARTABLE_GROUP, type FleetReport, type WorkloadReport } from './fleet-report.js';

/** Why an outdated workload is not restarted: a fixed set, each with the sentence printed for it. */
export const NotRestartedWhy = {
  noPodTemplate: 'no Pod template to roll',
  otherGroup: 'not an apps/v1 workload',
  onDelete: 'updateStrategy OnDelete: a restart changes no Pod',
  copiedStatus: `its Pod template carries a copied ${Annotations.status}: remove it`,
  copiedInjectedLabel: `its Pod template carries a copied label ${InjectedLabel.key}, so the API server never sends its Pods to the injector: remove it`,
  notFound: 'not found',
  rolloutInProgress: 'rollout in progress',
} as const;
export type NotRestartedWhy = (typeof NotRestartedWhy)[keyof typeof NotRestartedWhy];

/** What `--restart` does with an outdated workload, read from the workload object itself. */
export type WorkloadVerdict =
  | { readonly restart: true }
  | { readonly restart: false; readonly why: NotRestartedWhy; readonly detail?: string };

export interface NotRestarted {
  readonly workload: WorkloadReport;
  readonly why: NotRestartedWhy;
  /** More about the why: `1 of 3 Pods updated`. */
  readonly detail: string | undefined;
}

export interface RestartPlan {
  readonly restart: readonly WorkloadReport[];
  /** Never rolled by `--restart`: for a human to recreate. */
  readonly byHand: readonly NotRestarted[];
  /** Rolled once their rollout is done, or with `--force`. */
  readonly inProgress: readonly NotRestarted[];
}

/** Whether a restart is what the workload's Pods need: some run an outdated sidecar, or none because of copied marks. */
export function needsRestart(workload: WorkloadReport): boolean {
  return workload.outdated > 0 || workload.copied > 0;
}

/**
 * The workloads whose objects `--restart` reads before deciding: apps/v1
 * ones with outdated Pods or Pods with copied marks (rolled once their Pod
 * template no longer carries the marks, else left to a human).
 */
export function restartCandidates(report: FleetReport): WorkloadReport[] {
  return report.workloads.filter((workload) => needsRestart(workload) && workload.restartable);
}

/**
 * What `--restart` does with each outdated workload. `objects` holds the
 * restart candidates as read from the API server (absent: not found),
 * keyed by `ownerKey`; `force` restarts a workload whose rollout is in progress.
 */
export function planRestarts(report: FleetReport, objects: ReadonlyMap<string, JsonObject>, options: { readonly force: boolean }): RestartPlan {
  const restart: WorkloadReport[] = [];
  const byHand: NotRestarted[] = [];
  const inProgress: NotRestarted[] = [];
  for (const workload of report.workloads) {
    if (!needsRestart(workload)) continue;
    if (!workload.restartable) {
      const group = apiGroup(workload.apiVersion);
      byHand.push(FAMILIAR_GROUPS.includes(group) ? { workload, why: NotRestartedWhy.noPodTemplate, detail: undefined } : { workload, why: NotRestartedWhy.otherGroup, detail: `group ${group}` });
      continue;
    }
    const verdict = judgeWorkload(workload.kind, objects.get(ownerKey(workload.namespace, workload)));
    if (verdict.restart || (verdict.why === NotRestartedWhy.rolloutInProgress && options.force)) restart.push(workload);
    else (verdict.why === NotRestartedWhy.rolloutInProgress ? inProgress : byHand).push({ workload, why: verdict.why, detail: verdict.detail });
  }
  return { restart, byHand, inProgress };
}

/** Groups whose other kinds (Pod, Job, CronJob, ReplicaSet) are known to have no rollout. */
const FAMILIAR_GROUPS: readonly string[] = ['', 'batch', RESTARTABLE_GROUP];

/** Whether a restart of this Deployment, StatefulSet or DaemonSet (`object`) would roll its Pods, now. */
export function judgeWorkload(kind: string, object: JsonObject | undefined): WorkloadVerdict {
  if (object === undefined) return { restart: false, why: NotRestartedWhy.notFound };
  const spec = objectAt(object, 'spec');
  const template = objectAt(spec, 'template');
  // The webhook only patches Pods: a status or injected label in the template was copied there, and every Pod inherits it uninjected.
  const templateMetadata = objectAt(template, 'metadata');
  const templateAnnotations = objectAt(templateMetadata, 'annotations');
  if (templateAnnotations !== undefined && own(templateAnnotations, Annotations.status) !== undefined) return { restart: false, why: NotRestartedWhy.copiedStatus };
  const templateLabels = objectAt(templateMetadata, 'labels');
  if (templateLabels !== undefined && own(templateLabels, InjectedLabel.key) !== undefined) return { restart: false, why: NotRestartedWhy.copiedInjectedLabel };
  if ((kind === 'StatefulSet' || kind === 'DaemonSet') && stringAt(objectAt(spec, 'updateStrategy'), 'type') === 'OnDelete') {
    return { restart: false, why: NotRestartedWhy.onDelete };
  }
  const progress = rolloutProgress(kind, object);
  return progress === undefined ? { restart: true } : { restart: false, why: NotRestartedWhy.rolloutInProgress, detail: progress };
}

/**
 * Why the workload's rollout is not finished, or undefined when it is (as
 * `kubectl rollout status` judges it, without waiting for availability: a
 * restart while Pods are still being replaced starts that rollout over).
 */
export function rolloutProgress(kind: string, object: JsonObject): string | undefined {
  const generation = numberAt(objectAt(object, 'metadata'), 'generation');
  const status = objectAt(object, 'status');
  const observed = numberAt(status, 'observedGeneration');
  // Neither known (an object no controller has ever reported on): nothing says a rollout runs.
  if (generation === undefined && observed === undefined) return undefined;
  if (generation !== undefined && (observed === undefined || observed < generation)) return `the controller has not yet acted on generation ${generation}`;
  const spec = objectAt(object, 'spec');
  const updated = (field: string) => numberAt(status, field) ?? 0;
  if (kind === 'Deployment') {
    const replicas = numberAt(spec, 'replicas') ?? 1;
    if (updated('updatedReplicas') < replicas) return `${updated('updatedReplicas')} of ${replicas} Pods updated`;
    const old = updated('replicas') - updated('updatedReplicas');
    if (old > 0) return `${old} old ${old === 1 ? 'Pod' : 'Pods'} still running`;
  } else if (kind === 'StatefulSet') {
    const replicas = numberAt(spec, 'replicas') ?? 1;
    const partition = numberAt(objectAt(objectAt(spec, 'updateStrategy'), 'rollingUpdate'), 'partition') ?? 0;
    const target = Math.max(0, replicas - partition);
    if (updated('updatedReplicas') < target) return `${updated('updatedReplicas')} of ${target} Pods updated`;
  } else if (kind === 'DaemonSet') {
    const desired = updated('desiredNumberScheduled');
    if (updated('updatedNumberScheduled') < desired) return `${updated('updatedNumberScheduled')} of ${desired} Pods updated`;
  }
  return undefined;
}

function numberAt(object: JsonObject | undefined, key: string): number | undefined {
  if (object === undefined) return undefined;
  const value = own(object, key);
  return typeof value === 'number' ? value : undefined;
}

/** The API object read back, if it is one (what `kubeJson` returns is unknown). */
export function asWorkloadObject(value: unknown): JsonObject | undefined {
  return isJsonObject(value) ? value : undefined;
}
