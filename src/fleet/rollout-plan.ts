import { Annotations, isExcludedNamespace, NamespaceLabel, objectAt, own, stringAt, type DecisionOptions, type JsonObject } from '../injection/index.js';
import { ownerKey, type FleetReport, type WorkloadReport } from './fleet-report.js';
import { judgeWorkload, needsRestart } from './restart-plan.js';
import { restartedAtOf, rolloutHealth } from './rollout-health.js';

/**
 * The rollout by budget (docs/fleet.md): which outdated workloads the leader
 * brings current now, which of those it started are done, which failed. Pure:
 * the controller (kube/rollout-controller.ts) hands it the report and the
 * workload objects from its watches, and acts on the answer.
 */

/** On a Namespace or an apps/v1 workload: `paused` holds the rollout there. */
export const ROLLOUT_ANNOTATION = 'envoy-injector.io/rollout';
export const ROLLOUT_PAUSED = 'paused';

export interface RolloutSettings {
  /** Workloads rolling at once in the whole cluster (`--rollout-max-concurrent`). */
  readonly maxConcurrent: number;
  /** A rollout whose Pods are not all Ready this long after it started has failed (`--rollout-ready-timeout`). */
  readonly readyTimeoutMs: number;
}

/** A workload this leader (or the one before it) started to bring current, not yet settled. */
export interface InFlight {
  readonly workload: WorkloadReport;
  /** Milliseconds since the epoch. */
  readonly startedAt: number;
  /**
   * The generation the change made (a restart's new Pod template): until the
   * watch shows it, the cached object is the one from before the change, and
   * its settled status says nothing of the new Pods.
   */
  readonly awaitGeneration?: number;
}

/** Why an outdated workload waits: a fixed set (log fields, `explain`-like output). */
export const RolloutWait = {
  optedOut: 'opted out of injection',
  paused: 'paused',
  notRestartable: 'not restartable',
  namespaceBusy: 'another workload of its namespace is rolling',
  budget: 'the cluster budget is spent',
  retryLater: 'its last change was refused: tried again later',
} as const;
export type RolloutWait = (typeof RolloutWait)[keyof typeof RolloutWait];

export interface RolloutInput {
  readonly report: FleetReport;
  /** The apps/v1 workloads as the watches hold them, keyed by `ownerKey`. */
  readonly objects: ReadonlyMap<string, JsonObject>;
  /** A namespace's labels and annotations from the cache; undefined when unknown (then nothing there is touched). */
  readonly namespaceMetadata: (namespace: string) => { readonly labels: Readonly<Record<string, string>>; readonly annotations: Readonly<Record<string, string>> | undefined } | undefined;
  /** The webhook's excluded namespaces and its own. */
  readonly decision: DecisionOptions;
  readonly inFlight: readonly InFlight[];
  readonly settings: RolloutSettings;
  readonly now: number;
  /** Workloads (by `ownerKey`) whose last change the API server refused, not to be tried again yet. */
  readonly retryLater?: ReadonlySet<string>;
}

export interface RolloutStep {
  /** To bring current now, in the report's order (namespace, kind, name). */
  readonly start: readonly WorkloadReport[];
  /** In flight and settled (or gone): their slots are free. */
  readonly settled: readonly WorkloadReport[];
  /** In flight and failed: the rollout stops. */
  readonly failed: readonly { readonly workload: WorkloadReport; readonly why: string }[];
  /** Still in flight after this step (the started ones included). */
  readonly inFlight: readonly InFlight[];
  /** Outdated workloads left for now, with why. */
  readonly waiting: readonly { readonly workload: WorkloadReport; readonly why: RolloutWait; readonly detail?: string }[];
}

/** Judges what is in flight, then fills the free slots: one workload a namespace, `maxConcurrent` in the cluster. */
export function planRollout(input: RolloutInput): RolloutStep {
  const settled: WorkloadReport[] = [];
  const failed: { workload: WorkloadReport; why: string }[] = [];
  const inFlight: InFlight[] = [];
  for (const entry of input.inFlight) {
    const object = input.objects.get(keyOf(entry.workload));
    const unseen = object !== undefined && entry.awaitGeneration !== undefined && (numberAt(objectAt(object, 'metadata'), 'generation') ?? 0) < entry.awaitGeneration;
    const health = object === undefined ? { state: 'settled' as const } : unseen ? { state: 'progressing' as const, why: 'the change is not yet seen' } : rolloutHealth(entry.workload.kind, object);
    if (health.state === 'settled') settled.push(entry.workload);
    else if (health.state === 'failed') failed.push({ workload: entry.workload, why: health.why });
    else if (input.now - entry.startedAt >= input.settings.readyTimeoutMs) failed.push({ workload: entry.workload, why: `not settled ${Math.round(input.settings.readyTimeoutMs / 1000)} s after it started: ${health.why}` });
    else inFlight.push(entry);
  }
  const busy = new Set(inFlight.map((entry) => entry.workload.namespace));
  const flying = new Set(inFlight.map((entry) => keyOf(entry.workload)));
  const start: WorkloadReport[] = [];
  const waiting: { workload: WorkloadReport; why: RolloutWait; detail?: string }[] = [];
  const candidates = input.report.workloads.filter((workload) => needsRestart(workload) && workload.restartable && !flying.has(keyOf(workload)));
  // A rollout someone else started (a deploy, kubectl rollout restart) holds its namespace too.
  for (const workload of candidates) {
    const object = input.objects.get(keyOf(workload));
    if (object !== undefined && rolloutHealth(workload.kind, object).state !== 'settled') busy.add(workload.namespace);
  }
  for (const workload of candidates) {
    const object = input.objects.get(keyOf(workload));
    const held = holdOf(workload, object, input);
    if (held !== undefined) {
      waiting.push({ workload, ...held });
      continue;
    }
    if (busy.has(workload.namespace)) waiting.push({ workload, why: RolloutWait.namespaceBusy });
    else if (inFlight.length >= input.settings.maxConcurrent) waiting.push({ workload, why: RolloutWait.budget });
    else {
      start.push(workload);
      busy.add(workload.namespace);
      inFlight.push({ workload, startedAt: input.now });
    }
  }
  return { start, settled, failed, inFlight, waiting };
}

/** Why this workload may not be touched now, if it may not: opted out, paused, or not restartable as it stands. */
function holdOf(workload: WorkloadReport, object: JsonObject | undefined, input: RolloutInput): { why: RolloutWait; detail?: string } | undefined {
  const namespace = input.namespaceMetadata(workload.namespace);
  if (input.retryLater?.has(keyOf(workload)) === true) return { why: RolloutWait.retryLater };
  if (isExcludedNamespace(workload.namespace, input.decision)) return { why: RolloutWait.optedOut, detail: 'excluded namespace' };
  if (namespace === undefined) return { why: RolloutWait.optedOut, detail: 'namespace labels unknown' };
  if (namespace.labels[NamespaceLabel.key] === NamespaceLabel.disabled) return { why: RolloutWait.optedOut, detail: `namespace label ${NamespaceLabel.key}=${NamespaceLabel.disabled}` };
  if (namespace.annotations?.[ROLLOUT_ANNOTATION] === ROLLOUT_PAUSED) return { why: RolloutWait.paused, detail: `namespace annotation ${ROLLOUT_ANNOTATION}=${ROLLOUT_PAUSED}` };
  if (object === undefined) return { why: RolloutWait.notRestartable, detail: 'not found' };
  const metadata = objectAt(object, 'metadata');
  if (stringAt(objectAt(metadata, 'annotations'), ROLLOUT_ANNOTATION) === ROLLOUT_PAUSED) return { why: RolloutWait.paused, detail: `annotation ${ROLLOUT_ANNOTATION}=${ROLLOUT_PAUSED}` };
  const templateAnnotations = objectAt(objectAt(objectAt(objectAt(object, 'spec'), 'template'), 'metadata'), 'annotations');
  if (stringAt(templateAnnotations, Annotations.inject) === 'false') return { why: RolloutWait.optedOut, detail: `Pod template annotation ${Annotations.inject}: "false"` };
  const verdict = judgeWorkload(workload.kind, object);
  if (!verdict.restart) return { why: verdict.why === 'rollout in progress' ? RolloutWait.namespaceBusy : RolloutWait.notRestartable, detail: verdict.detail ?? verdict.why };
  return undefined;
}

/**
 * Rollouts the leader before this one started and that have not settled:
 * apps/v1 workloads of the report whose Pod template was restarted less than
 * the ready timeout ago. A new leader takes them over, so that a change of
 * leader neither doubles the budget nor skips a failure.
 */
export function inheritedInFlight(report: FleetReport, objects: ReadonlyMap<string, JsonObject>, settings: RolloutSettings, now: number): InFlight[] {
  const inherited: InFlight[] = [];
  for (const workload of report.workloads) {
    if (!workload.restartable) continue;
    const object = objects.get(keyOf(workload));
    const startedAt = object === undefined ? undefined : restartedAtOf(object);
    if (object === undefined || startedAt === undefined || now - startedAt >= settings.readyTimeoutMs) continue;
    if (rolloutHealth(workload.kind, object).state !== 'settled') inherited.push({ workload, startedAt });
  }
  return inherited;
}

/** The live templates in one string: a stop holds until they change. */
export function templatesFingerprint(report: FleetReport): string {
  return report.templates.map((template) => `${template.name}@${template.hash}`).join(',');
}

/** A stopped rollout, as the Lease's `envoy-injector.io/rollout-stopped` annotation keeps it across leaders. */
export interface RolloutStop {
  readonly namespace: string;
  readonly kind: string;
  readonly name: string;
  readonly why: string;
  readonly templates: string;
  readonly at: string;
}

export const ROLLOUT_STOPPED_ANNOTATION = 'envoy-injector.io/rollout-stopped';

/** The stop as stored, or undefined when absent or unreadable (an unreadable one is dropped: the next failure stops again). */
export function parseRolloutStop(text: string | undefined): RolloutStop | undefined {
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text) as Partial<Record<keyof RolloutStop, unknown>>;
    const fields = ['namespace', 'kind', 'name', 'why', 'templates', 'at'] as const;
    return fields.every((field) => typeof value[field] === 'string') ? (value as RolloutStop) : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Whether a stop still holds: until the templates change (the operator fixed
 * them) or the workload that failed settles (fixed by hand), or is gone.
 */
export function stopHolds(stop: RolloutStop, report: FleetReport, objects: ReadonlyMap<string, JsonObject>): boolean {
  if (stop.templates !== templatesFingerprint(report)) return false;
  const object = objects.get(ownerKey(stop.namespace, { apiVersion: 'apps/v1', kind: stop.kind, name: stop.name }));
  return object !== undefined && rolloutHealth(stop.kind, object).state !== 'settled';
}

function keyOf(workload: WorkloadReport): string {
  return ownerKey(workload.namespace, workload);
}

function numberAt(object: JsonObject | undefined, key: string): number | undefined {
  const value = object === undefined ? undefined : own(object, key);
  return typeof value === 'number' ? value : undefined;
}
