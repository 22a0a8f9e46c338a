import { arrayAt, CAPTURE_CHECK_NAME, CheckCaptureExit, isJsonObject, objectAt, own, type JsonObject } from '../../injection/index.js';
import { cniModeStatus } from './capture-status.js';

/**
 * The node agent's repair (docs/design.md §11, CNI mode): a Pod in CNI mode
 * that started before the plugin was in the chain has no rules, and its
 * check says so (exit 69). The agent deletes it, so that its controller makes
 * a new one, now captured, with a Warning Event on the Pod. Pure: which Pods,
 * and the Event's words.
 */

/** The Event's reason on a repaired Pod. */
export const CAPTURE_REPAIRED_REASON = 'CaptureRepaired';
/** The Event's reason on a Pod that needs repair but has no controller to make it again. */
export const CAPTURE_NOT_REPAIRED_REASON = 'CaptureNotRepaired';

/**
 * What the agent does with a Pod that needs repair: `delete` it when a
 * controller (a ReplicaSet, a Job, a StatefulSet...) will make a new one;
 * `leave` a Pod nothing would make again (a bare Pod), since deleting it
 * would lose it for good: its check keeps it from running uncaptured, and a
 * Warning says what to do.
 */
export type RepairAction = 'delete' | 'leave';

/** Whether the agent deletes this Pod: ours in CNI mode, not being deleted, its check ended with "not redirected" (now or last time). */
export function needsRepair(pod: JsonObject, nodeName: string): boolean {
  const metadata = objectAt(pod, 'metadata');
  if (own(objectAt(pod, 'spec') ?? {}, 'nodeName') !== nodeName || own(metadata ?? {}, 'deletionTimestamp') !== undefined) return false;
  if (cniModeStatus(pod) === undefined) return false;
  const check = (arrayAt(objectAt(pod, 'status'), 'initContainerStatuses') ?? []).find((entry) => isJsonObject(entry) && own(entry, 'name') === CAPTURE_CHECK_NAME);
  if (!isJsonObject(check)) return false;
  return ['state', 'lastState'].some((field) => own(objectAt(objectAt(check, field), 'terminated') ?? {}, 'exitCode') === CheckCaptureExit.notRedirected);
}

export function repairAction(pod: JsonObject, nodeName: string): RepairAction | undefined {
  if (!needsRepair(pod, nodeName)) return undefined;
  const owners = arrayAt(objectAt(pod, 'metadata'), 'ownerReferences') ?? [];
  return owners.some((owner) => isJsonObject(owner) && own(owner, 'controller') === true) ? 'delete' : 'leave';
}

/** The Event's note: what happened, why, what follows. */
export function repairNote(nodeName: string): string {
  return `${CAPTURE_CHECK_NAME} found no capture rules (exit ${CheckCaptureExit.notRedirected}): the Pod's network was set up on node ${nodeName} before the envoy-injector CNI plugin was installed; deleted so that its controller makes a new one, captured`;
}

/** The note on a Pod left as it is: why, and what its owner can do. */
export function notRepairedNote(nodeName: string): string {
  return `${CAPTURE_CHECK_NAME} found no capture rules (exit ${CheckCaptureExit.notRedirected}): the Pod's network was set up on node ${nodeName} before the envoy-injector CNI plugin was installed; not deleted, as no controller would make it again: it does not run uncaptured, and once it is deleted and created again it is captured`;
}
