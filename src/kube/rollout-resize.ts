import type { KubeConfig } from '@kubernetes/client-node';
import type { WorkloadReport } from '../fleet/fleet-report.js';
import { planPodResize, type PodResizePlan, type ResizeContext } from '../fleet/resize-plan.js';
import { isJsonObject, type JsonObject } from '../injection/index.js';
import { kubeJson, KubeRequestError } from './api/index.js';
import { resizeAgent, resizePod, resizeServed, type PodRef } from './pod-resize.js';

/** What the rollout did to bring a workload current. */
export type UpdateOutcome = 'restarted' | 'resized';

export interface ResizeStepOptions {
  readonly kubeConfig: KubeConfig;
  /** The restart, when resizing cannot bring every Pod current. */
  readonly restart: (workload: WorkloadReport) => Promise<void>;
  /** The live templates, the server's allowed overrides and the namespace's annotations, as `status --resize` plans with. */
  readonly context: (namespace: string) => ResizeContext | undefined;
  readonly warn: (message: string) => void;
}

/**
 * Brings a workload current in place where every outdated Pod differs from
 * the live template only in CPU and memory (issue 52): each Pod read afresh,
 * planned as `status --resize` plans it, resized; else, or when the API server
 * refuses a resize, the restart. Resolves once the resizes are recorded (the
 * Pods count as current at once: no new generation to wait for).
 */
export async function resizeOrRestart(workload: WorkloadReport, pods: readonly PodRef[], options: ResizeStepOptions): Promise<UpdateOutcome> {
  const context = options.context(workload.namespace);
  const plans = workload.resizable > 0 && workload.resizable === workload.outdated && context !== undefined && (await servedOnce(options.kubeConfig)) ? await planAll(options.kubeConfig, pods, context) : undefined;
  if (plans === undefined || typeof plans === 'string') {
    if (typeof plans === 'string') options.warn(`rollout: ${workload.namespace}/${workload.name} is restarted, not resized: ${plans}`);
    await options.restart(workload);
    return 'restarted';
  }
  const agent = resizeAgent();
  try {
    for (const { pod, plan } of plans) {
      const outcome = await resizePod(options.kubeConfig, pod, plan, agent);
      if (outcome.outcome === 'refused') {
        options.warn(`rollout: ${workload.namespace}/${workload.name} is restarted, not resized: ${pod.name}: ${outcome.why}`);
        await options.restart(workload);
        return 'restarted';
      }
      // Reported, never sent again: the Pod's status now names the live template.
      if (outcome.outcome === 'resized' && outcome.pending !== undefined) options.warn(`rollout: ${workload.namespace}/${pod.name} resized; the kubelet reports ${outcome.pending.condition} (${outcome.pending.reason}): ${outcome.pending.message}`);
    }
  } finally {
    agent.destroy();
  }
  return 'resized';
}

/** Each Pod's resize plan, or why one of them needs a restart. */
async function planAll(kubeConfig: KubeConfig, pods: readonly PodRef[], context: ResizeContext): Promise<{ pod: PodRef; plan: Extract<PodResizePlan, { kind: 'resize' }> }[] | string> {
  const plans: { pod: PodRef; plan: Extract<PodResizePlan, { kind: 'resize' }> }[] = [];
  for (const pod of pods) {
    const stored = await readPod(kubeConfig, pod);
    if (stored === undefined) continue;
    const plan = planPodResize(stored, context);
    if (plan.kind === 'restart') return `${pod.name}: ${plan.why}`;
    if (plan.kind === 'pending') return `${pod.name}: the kubelet has not applied its last resize (${plan.condition}, ${plan.reason})`;
    if (plan.kind === 'resize') plans.push({ pod, plan });
  }
  return plans;
}

async function readPod(kubeConfig: KubeConfig, pod: PodRef): Promise<JsonObject | undefined> {
  try {
    const answer = await kubeJson(kubeConfig, { method: 'GET', path: `/api/v1/namespaces/${encodeURIComponent(pod.namespace)}/pods/${encodeURIComponent(pod.name)}`, timeoutMs: 10_000 });
    return isJsonObject(answer) ? answer : undefined;
  } catch (error) {
    if (error instanceof KubeRequestError && error.statusCode === 404) return undefined;
    throw error;
  }
}

/** Whether the cluster serves `pods/resize`: a yes is kept, a no asked again next time (an upgrade may add it). */
const servedBy = new WeakMap<KubeConfig, boolean>();
async function servedOnce(kubeConfig: KubeConfig): Promise<boolean> {
  if (servedBy.get(kubeConfig) === true) return true;
  const served = await resizeServed(kubeConfig);
  servedBy.set(kubeConfig, served);
  return served;
}
