import { createHash } from 'node:crypto';
import { microTime } from './event-series.js';
import { truncateNote } from './workload-notices.js';

/** The rollout's Events come from a controller of their own, apart from the webhook's (`envoy-injector.io/injector`). */
export const ROLLOUT_REPORTING_CONTROLLER = 'envoy-injector.io/rollout';
export const ROLLOUT_EVENT_ACTION = 'RolloutSidecar';
/** The Warning on a workload whose rollout failed: the rollout by budget stops there. */
export const ROLLOUT_FAILED_REASON = 'RolloutFailed';

export interface RolloutEventInput {
  readonly namespace: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string | undefined;
  readonly why: string;
  readonly reportingInstance: string;
  readonly at: Date;
}

/**
 * The events.k8s.io/v1 Warning on a workload whose rollout failed. One per
 * failure (a stopped rollout makes no more), named after the workload and a
 * hash of its uid and the time, so a second failure is a second Event.
 */
export function rolloutFailedEvent(input: RolloutEventInput): Record<string, unknown> {
  const hash = createHash('sha256').update(JSON.stringify([ROLLOUT_REPORTING_CONTROLLER, input.uid ?? input.name, input.at.toISOString()])).digest('hex').slice(0, 16);
  const base = input.name.toLowerCase().replace(/[^a-z0-9.-]/g, '-').slice(0, 253 - 17).replace(/^[^a-z0-9]+|[^a-z0-9]+$/g, '');
  return {
    apiVersion: 'events.k8s.io/v1',
    kind: 'Event',
    metadata: { name: `${base === '' ? 'workload' : base}.${hash}`, namespace: input.namespace },
    eventTime: microTime(input.at),
    type: 'Warning',
    reason: ROLLOUT_FAILED_REASON,
    note: truncateNote(`the sidecar's rollout failed: ${input.why}; the rollout by budget is stopped until the templates change or this workload is Ready again (docs/fleet.md)`),
    action: ROLLOUT_EVENT_ACTION,
    reportingController: ROLLOUT_REPORTING_CONTROLLER,
    reportingInstance: input.reportingInstance.slice(0, 128) || 'envoy-injector',
    regarding: { apiVersion: 'apps/v1', kind: input.kind, name: input.name, namespace: input.namespace, ...(input.uid === undefined ? {} : { uid: input.uid }) },
  };
}
