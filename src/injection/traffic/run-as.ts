import { arrayAt, entryName, isJsonObject, objectAt, own, type JsonObject } from '../basics/index.js';

/**
 * The init containers and containers of POD whose effective FIELD (their own
 * securityContext's, else the Pod's) is ID, each with where it is set: the
 * capture rules let the proxy's user (and under TPROXY its group) past the
 * proxy, so such a container would reach the network unproxied. One whose
 * user or group only its image sets cannot be known here.
 */
export function containersRunningAs(pod: JsonObject, field: 'runAsUser' | 'runAsGroup', id: number): { name: string; where: string }[] {
  const spec = objectAt(pod, 'spec');
  const podValue = own(objectAt(spec, 'securityContext') ?? {}, field);
  return ['initContainers', 'containers'].flatMap((list) =>
    (arrayAt(spec, list) ?? []).flatMap((entry) => {
      const container = isJsonObject(entry) ? entry : undefined;
      const ownValue = own(objectAt(container, 'securityContext') ?? {}, field);
      if ((ownValue ?? podValue) !== id) return [];
      return [{ name: entryName(container) ?? '', where: ownValue === undefined ? `the Pod's securityContext.${field}` : `its securityContext.${field}` }];
    }),
  );
}
