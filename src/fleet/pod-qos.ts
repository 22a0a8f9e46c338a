import { arrayAt, isJsonObject, objectAt, own, toMilli, type JsonObject } from '../injection/index.js';

/** The Pod's QoS class, as the API server computes it: a resize may never change it (it refuses one that would). */
export type QosClass = 'Guaranteed' | 'Burstable' | 'BestEffort';

const QOS_RESOURCES = ['cpu', 'memory'] as const;

/**
 * The QoS class of POD's spec (component-helpers' `ComputePodQOS`): from
 * the Pod-level `spec.resources` when it sets cpu or memory there, else from
 * every container and init container. A value that is no quantity makes it
 * undefined: then nobody can say, and the caller leaves the Pod to a restart.
 */
export function podQosClass(pod: JsonObject): QosClass | undefined {
  const spec = objectAt(pod, 'spec');
  const podLevel = objectAt(spec, 'resources');
  const setsPodLevel = QOS_RESOURCES.some((name) => own(objectAt(podLevel, 'requests') ?? {}, name) !== undefined || own(objectAt(podLevel, 'limits') ?? {}, name) !== undefined);
  if (podLevel !== undefined && setsPodLevel) return qosOf([podLevel]);
  const containers = ['containers', 'initContainers'].flatMap((list) => (arrayAt(spec, list) ?? []).filter(isJsonObject));
  return qosOf(containers.map((container) => objectAt(container, 'resources') ?? {}));
}

/** The rule over resource blocks: none anywhere is BestEffort; limits of both everywhere, equal to the requests in sum, Guaranteed. */
function qosOf(blocks: readonly JsonObject[]): QosClass | undefined {
  const requests = new Map<string, bigint>();
  const limits = new Map<string, bigint>();
  let guaranteed = true;
  for (const block of blocks) {
    for (const [kind, sums] of [['requests', requests], ['limits', limits]] as const) {
      const amounts = objectAt(block, kind) ?? {};
      for (const name of QOS_RESOURCES) {
        const text = own(amounts, name);
        if (text === undefined) continue;
        const milli = typeof text === 'string' || typeof text === 'number' ? toMilli(text) : undefined;
        if (milli === undefined) return undefined;
        // Zero counts as unset (the API server's `IsZero` check).
        if (milli !== 0n) sums.set(name, (sums.get(name) ?? 0n) + milli);
      }
    }
    const blockLimits = objectAt(block, 'limits') ?? {};
    if (!QOS_RESOURCES.every((name) => own(blockLimits, name) !== undefined && toMilli(String(own(blockLimits, name))) !== 0n)) guaranteed = false;
  }
  if (requests.size === 0 && limits.size === 0) return 'BestEffort';
  if (guaranteed) {
    for (const [name, request] of requests) if (limits.get(name) !== request) guaranteed = false;
  }
  return guaranteed && requests.size === limits.size ? 'Guaranteed' : 'Burstable';
}
