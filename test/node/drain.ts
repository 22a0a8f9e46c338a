import { ApiException, CoreV1Api, type V1Pod } from '@kubernetes/client-node';
import { eventually } from '../e2e/cluster.js';

/**
 * What `kubectl drain NODE --ignore-daemonsets --delete-emptydir-data
 * --force --timeout=T` does (kubectl's `drain` package), for the node tier
 * that has no kubectl: cordon the node; list the Pods bound to it; evict each
 * at once through the Eviction API, a refusal (429: the Pod's disruption
 * budget) retried every 5 s, as kubectl's `evictPods` does; then wait until
 * each evicted Pod is gone (or replaced under its name: another UID). It
 * fails when T passes first, naming the Pods still refused or still there.
 */
export interface Drain {
  /** How many times the Eviction API refused POD so far (429). */
  refusals(pod: string): number;
  /** Resolves once every Pod is evicted and gone; rejects when the bound passes first. */
  readonly done: Promise<void>;
}

const RETRY_MS = 5_000;
const key = (pod: V1Pod): string => `${pod.metadata?.namespace ?? ''}/${pod.metadata?.name ?? ''}`;

/** `kubectl cordon` (true) or `kubectl uncordon` (false). */
export async function cordon(core: CoreV1Api, node: string, unschedulable: boolean): Promise<void> {
  await core.patchNode({ name: node, body: [{ op: 'add', path: '/spec/unschedulable', value: unschedulable }] });
}

export async function startDrain(core: CoreV1Api, node: string, timeoutMs: number): Promise<Drain> {
  await cordon(core, node, true);
  const deadline = Date.now() + timeoutMs;
  const listed = await core.listPodForAllNamespaces({ fieldSelector: `spec.nodeName=${node}` });
  // kubectl skips the Pods that are already finished or being deleted only for the eviction, not for the wait; these have none worth waiting for.
  const pods = listed.items.filter((pod) => pod.metadata?.deletionTimestamp === undefined && !['Succeeded', 'Failed'].includes(pod.status?.phase ?? ''));
  const refused = new Map<string, number>();
  const evict = async (pod: V1Pod): Promise<void> => {
    const name = pod.metadata?.name ?? '';
    const namespace = pod.metadata?.namespace ?? '';
    for (;;) {
      try {
        await core.createNamespacedPodEviction({ name, namespace, body: { metadata: { name, namespace } } });
        break;
      } catch (error) {
        if (error instanceof ApiException && error.code === 404) return;
        if (!(error instanceof ApiException && error.code === 429)) throw error;
        refused.set(key(pod), (refused.get(key(pod)) ?? 0) + 1);
        if (Date.now() + RETRY_MS > deadline) throw new Error(`the drain of node ${node} did not finish in ${timeoutMs / 1000} s: Pod ${key(pod)} refused ${refused.get(key(pod))} times (429: "${error.body}")`);
        await new Promise((resolve) => setTimeout(resolve, RETRY_MS));
      }
    }
    await eventually(`Pod ${key(pod)} gone after its eviction (the drain of node ${node})`, async () => {
      const now = await core.readNamespacedPod({ name, namespace }).catch((error: unknown) => {
        if (error instanceof ApiException && error.code === 404) return undefined;
        throw error;
      });
      return now === undefined || now.metadata?.uid !== pod.metadata?.uid ? true : undefined;
    }, Math.max(deadline - Date.now(), 1_000), 1_000);
  };
  const done = Promise.all(pods.map(evict)).then(() => undefined);
  // Read by the caller; a rejection before the caller awaits it must not end the process.
  done.catch(() => undefined);
  return { refusals: (pod) => refused.get(pod) ?? 0, done };
}
