import { CoreV1Api } from '@kubernetes/client-node';

/**
 * The node tier has no kube-scheduler: this binds every Pending Pod of
 * NAMESPACE that names no node (and matches LABEL_SELECTOR, if given) to NODE, as a scheduler would, while the node
 * is schedulable (a cordoned node gets none: `spec.unschedulable`). It looks
 * every 250 ms; a binding that fails (the Pod gone, bound meanwhile) is
 * tried again at the next look or no more.
 */
export interface Scheduler {
  stop(): Promise<void>;
}

export function startScheduler(core: CoreV1Api, namespace: string, node: string, labelSelector?: string): Scheduler {
  let stopped = false;
  const round = async (): Promise<void> => {
    const read = await core.readNode({ name: node });
    if (read.spec?.unschedulable === true) return;
    const pending = await core.listNamespacedPod({ namespace, fieldSelector: 'spec.nodeName=', ...(labelSelector === undefined ? {} : { labelSelector }) });
    for (const pod of pending.items) {
      const name = pod.metadata?.name ?? '';
      if (pod.metadata?.deletionTimestamp !== undefined) continue;
      await core.createNamespacedPodBinding({ name, namespace, body: { metadata: { name }, target: { apiVersion: 'v1', kind: 'Node', name: node } } }).catch(() => undefined);
    }
  };
  const loop = (async () => {
    while (!stopped) {
      await round().catch(() => undefined);
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  })();
  return {
    stop: async () => {
      stopped = true;
      await loop;
    },
  };
}
