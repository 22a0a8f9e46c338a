import type { KubeConfig } from '@kubernetes/client-node';
import { podState, type FleetInput, type PodRecord } from '../fleet/fleet-report.js';
import { pendingResize, planPodResize, type PodResizePlan, type ResizeChange } from '../fleet/resize-plan.js';
import type { OverrideName } from '../injection/index.js';

/**
 * `status --resize` (docs/fleet.md, "Resize in place"): each resizable Pod
 * planned (fleet/resize-plan.ts), then resized (kube/pod-resize.ts), a few
 * at a time; and what the table and the JSON say of it.
 */

export interface PodName {
  readonly namespace: string;
  readonly name: string;
}

export type PendingRef = PodName & { readonly condition: string; readonly reason: string; readonly message: string };

/** What `--resize` did, in the JSON output (`resize`). */
export interface ResizeOutcome {
  /** Whether the API server serves `pods/resize` (1.33+). */
  readonly served: boolean;
  readonly dryRun: boolean;
  /** False when the prompt was answered no. */
  readonly confirmed: boolean;
  /** Resized and recorded current; with dryRun, what would be. */
  readonly resized: readonly (PodName & { readonly changes: readonly ResizeChange[]; readonly restartsContainers: readonly string[] })[];
  /** Left to a restart: why (a QoS change, a refusal of the API server, no resize subresource...). */
  readonly notResized: readonly (PodName & { readonly why: string })[];
  /** Changed since they were read, or gone: nothing written; the next run reads them again. */
  readonly skipped: readonly (PodName & { readonly why: string })[];
  /** The kubelet has not applied their last resize: reported, never sent again. */
  readonly pending: readonly PendingRef[];
  readonly failed: readonly (PodName & { readonly error: string })[];
}

export interface ResizeTarget extends PodName {
  readonly plan: Extract<PodResizePlan, { kind: 'resize' }>;
}

export interface ResizePlanning {
  readonly targets: readonly ResizeTarget[];
  readonly notResized: readonly (PodName & { readonly why: string })[];
  readonly pending: readonly PendingRef[];
}

/** The plan of every Pod the report counts resizable. */
export function planResizes(pods: readonly PodRecord[], input: FleetInput, options: { readonly served: boolean; readonly allowedOverrides: readonly OverrideName[]; readonly namespaceAnnotations: (namespace: string) => Readonly<Record<string, string>> | undefined }): ResizePlanning {
  const targets: ResizeTarget[] = [];
  const notResized: (PodName & { why: string })[] = [];
  const pending: PendingRef[] = [];
  for (const pod of pods) {
    const state = podState(pod, input);
    if (state.state !== 'outdated' || !state.resizable || pod.resizeFacts === undefined) continue;
    const ref = { namespace: pod.namespace, name: pod.name };
    if (!options.served) {
      notResized.push({ ...ref, why: 'the API server has no resize subresource (Kubernetes before 1.33)' });
      continue;
    }
    const plan = planPodResize(pod.resizeFacts, { templates: input.templates, allowedOverrides: options.allowedOverrides, namespaceAnnotations: options.namespaceAnnotations(pod.namespace) });
    if (plan.kind === 'resize') targets.push({ ...ref, plan });
    else if (plan.kind === 'pending') pending.push({ ...ref, condition: plan.condition, reason: plan.reason, message: plan.message });
    else if (plan.kind === 'restart') notResized.push({ ...ref, why: plan.why });
  }
  return { targets, notResized, pending };
}

/** Pods whose last resize the kubelet has not applied (their conditions), whatever their state: `status` lists them. */
export function pendingResizes(pods: readonly PodRecord[]): PendingRef[] {
  return pods.flatMap((pod) => {
    const pending = pod.resizeFacts === undefined ? undefined : pendingResize(pod.resizeFacts);
    return pending === undefined ? [] : [{ namespace: pod.namespace, name: pod.name, condition: pending.condition, reason: pending.reason, message: pending.message }];
  });
}

/** Sends each target's resize, CONCURRENCY at a time; never rejects (a failure is the Pod's, in `failed`). */
export async function runResizes(kubeConfig: KubeConfig, planning: ResizePlanning, concurrency: number): Promise<Omit<ResizeOutcome, 'served' | 'dryRun' | 'confirmed'>> {
  const { resizeAgent, resizePod } = await import('../kube/pod-resize.js');
  const agent = resizeAgent();
  const resized: (PodName & { changes: readonly ResizeChange[]; restartsContainers: readonly string[] })[] = [];
  const notResized = [...planning.notResized];
  const skipped: (PodName & { why: string })[] = [];
  const pending = [...planning.pending];
  const failed: (PodName & { error: string })[] = [];
  let next = 0;
  await Promise.all(Array.from({ length: Math.min(concurrency, planning.targets.length) }, async () => {
    while (next < planning.targets.length) {
      const target = planning.targets[next++] as ResizeTarget;
      const ref = { namespace: target.namespace, name: target.name };
      try {
        const outcome = await resizePod(kubeConfig, ref, target.plan, agent);
        if (outcome.outcome === 'resized') {
          resized.push({ ...ref, changes: target.plan.changes, restartsContainers: target.plan.restartsContainers });
          if (outcome.pending !== undefined) pending.push({ ...ref, condition: outcome.pending.condition, reason: outcome.pending.reason, message: outcome.pending.message });
        } else if (outcome.outcome === 'refused') notResized.push({ ...ref, why: outcome.why });
        else skipped.push({ ...ref, why: outcome.why });
      } catch (error) {
        failed.push({ ...ref, error: error instanceof Error ? error.message.split('\n')[0] ?? '' : String(error) });
      }
    }
  }));
  agent.destroy();
  const byName = (a: PodName, b: PodName): number => (a.namespace === b.namespace ? (a.name < b.name ? -1 : a.name > b.name ? 1 : 0) : a.namespace < b.namespace ? -1 : 1);
  return { resized: resized.sort(byName), notResized: notResized.sort(byName), skipped: skipped.sort(byName), pending: pending.sort(byName), failed: failed.sort(byName) };
}

/** The line under the table about resizable Pods; undefined when there are none. */
export function resizableLine(resizable: number, served: boolean): string | undefined {
  if (resizable === 0) return undefined;
  const which = `${resizable} of the outdated Pods differ${resizable === 1 ? 's' : ''} from the live template only in CPU and memory`;
  return served ? `${which}: --resize resizes them in place.` : `${which}, but this API server has no resize subresource (Kubernetes before 1.33): --restart brings them current.`;
}

/** The lines for Pods whose resize the kubelet has not applied. */
export function pendingLines(pending: readonly PendingRef[]): string[] {
  return pending.map((entry) => `Resize not applied by the kubelet: ${entry.namespace}/${entry.name} (${entry.condition}${entry.reason === '' ? '' : ` ${entry.reason}`}${entry.message === '' ? '' : `: ${entry.message}`}).`);
}

function describeChanges(changes: readonly ResizeChange[]): string {
  return changes.length === 0 ? 'values already in place, status recorded' : changes.map((change) => `${change.container} ${change.field} ${change.before ?? '(none)'} -> ${change.after}`).join(', ');
}

/** What `--resize` did, for the table. */
export function formatResize(outcome: ResizeOutcome): string {
  const lines: string[] = [''];
  if (!outcome.served) lines.push('No Pod resized: this API server has no resize subresource (Kubernetes before 1.33); --restart brings them current.');
  else if (outcome.resized.length === 0 && outcome.notResized.length === 0 && outcome.pending.length === 0) lines.push('Nothing to resize.');
  else if (outcome.resized.length > 0) {
    lines.push(outcome.dryRun ? 'Would resize in place (pods/resize):' : outcome.confirmed ? 'Resized in place (pods/resize), recorded as current:' : 'Not resized (not confirmed):');
    for (const entry of outcome.resized) lines.push(`  ${outcome.dryRun || !outcome.confirmed ? 'would resize' : 'resized'} ${entry.namespace}/${entry.name}: ${describeChanges(entry.changes)}${entry.restartsContainers.length > 0 ? ` (its resizePolicy restarts ${entry.restartsContainers.join(', ')})` : ''}`);
  }
  if (outcome.notResized.length > 0 && outcome.served) lines.push(`Not resized (left to --restart): ${outcome.notResized.map((entry) => `${entry.namespace}/${entry.name}: ${entry.why}`).join('; ')}.`);
  if (outcome.skipped.length > 0) lines.push(`Skipped (changed since read; run again): ${outcome.skipped.map((entry) => `${entry.namespace}/${entry.name}: ${entry.why}`).join('; ')}.`);
  lines.push(...pendingLines(outcome.pending));
  for (const entry of outcome.failed) lines.push(`  FAILED ${entry.namespace}/${entry.name}: ${entry.error}`);
  return lines.join('\n') + '\n';
}
