import { arrayAt, isJsonObject, objectAt, own, stringAt, type JsonObject } from '../injection/index.js';

/**
 * How a Deployment's, StatefulSet's or DaemonSet's rollout stands, read from
 * its status as its controller writes it (`kubectl rollout status`'s rules,
 * plus readiness): the rollout by budget starts the next workload only once
 * the last one is `settled`, and stops when one has `failed`.
 */
export type RolloutHealth =
  | { readonly state: 'settled' }
  | { readonly state: 'progressing'; readonly why: string }
  | { readonly state: 'failed'; readonly why: string };

/** `kubectl.kubernetes.io/restartedAt`, which `kubectl rollout restart` and `status --restart` write on the Pod template. */
export const RESTARTED_AT = 'kubectl.kubernetes.io/restartedAt';

/**
 * Settled: the controller has acted on the latest generation, every Pod is of
 * the new template, none of the old is left, and every Pod is Ready
 * (available, where the kind counts it). Failed: the Deployment controller
 * gave up (`Progressing` False, `ProgressDeadlineExceeded`). A StatefulSet or
 * DaemonSet has no such condition: the caller's bound on readiness decides.
 */
export function rolloutHealth(kind: string, object: JsonObject): RolloutHealth {
  const generation = numberAt(objectAt(object, 'metadata'), 'generation');
  const status = objectAt(object, 'status');
  const observed = numberAt(status, 'observedGeneration');
  const count = (field: string): number => numberAt(status, field) ?? 0;
  if (kind === 'Deployment') {
    const stalled = progressDeadlineExceeded(status);
    if (stalled !== undefined) return { state: 'failed', why: stalled };
  }
  if (generation !== undefined && (observed === undefined || observed < generation)) return { state: 'progressing', why: `the controller has not yet acted on generation ${generation}` };
  const spec = objectAt(object, 'spec');
  const replicas = numberAt(spec, 'replicas') ?? 1;
  const progressing = (why: string): RolloutHealth => ({ state: 'progressing', why });
  if (kind === 'Deployment') {
    if (count('updatedReplicas') < replicas) return progressing(`${count('updatedReplicas')} of ${replicas} Pods updated`);
    if (count('replicas') > count('updatedReplicas')) return progressing(`${count('replicas') - count('updatedReplicas')} old Pods left`);
    if (count('availableReplicas') < replicas) return progressing(`${count('availableReplicas')} of ${replicas} Pods available`);
  } else if (kind === 'StatefulSet') {
    const partition = numberAt(objectAt(objectAt(spec, 'updateStrategy'), 'rollingUpdate'), 'partition') ?? 0;
    const target = Math.max(0, replicas - partition);
    if (count('updatedReplicas') < target) return progressing(`${count('updatedReplicas')} of ${target} Pods updated`);
    if (partition === 0 && stringAt(status, 'updateRevision') !== stringAt(status, 'currentRevision')) return progressing('the update revision is not yet the current one');
    if (count('readyReplicas') < replicas) return progressing(`${count('readyReplicas')} of ${replicas} Pods Ready`);
  } else if (kind === 'DaemonSet') {
    const desired = count('desiredNumberScheduled');
    if (count('updatedNumberScheduled') < desired) return progressing(`${count('updatedNumberScheduled')} of ${desired} Pods updated`);
    if (count('numberAvailable') < desired) return progressing(`${count('numberAvailable')} of ${desired} Pods available`);
  }
  return { state: 'settled' };
}

/** The Deployment controller's verdict that the rollout stopped making progress, with its message. */
function progressDeadlineExceeded(status: JsonObject | undefined): string | undefined {
  for (const condition of arrayAt(status, 'conditions') ?? []) {
    if (!isJsonObject(condition) || stringAt(condition, 'type') !== 'Progressing') continue;
    if (stringAt(condition, 'status') === 'False' && stringAt(condition, 'reason') === 'ProgressDeadlineExceeded') {
      return `progress deadline exceeded${stringAt(condition, 'message') === undefined ? '' : `: ${stringAt(condition, 'message') ?? ''}`}`;
    }
  }
  return undefined;
}

/** When the Pod template was last restarted (its `restartedAt`, in ms), if it carries a readable one. */
export function restartedAtOf(object: JsonObject): number | undefined {
  const annotations = objectAt(objectAt(objectAt(objectAt(object, 'spec'), 'template'), 'metadata'), 'annotations');
  const value = stringAt(annotations, RESTARTED_AT);
  if (value === undefined) return undefined;
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : at;
}

function numberAt(object: JsonObject | undefined, key: string): number | undefined {
  if (object === undefined) return undefined;
  const value = own(object, key);
  return typeof value === 'number' ? value : undefined;
}
