import { arrayAt, entryName, isJsonObject, milliFormat, objectAt, own, padPodResources, renderMilli, toMilli, type AddedContainers, type JsonObject } from '../injection/index.js';

/** One value the resize changes: `proxy` `requests.cpu` 50m -> 100m, or `spec.resources` `limits.memory`. */
export interface ResizeChange {
  /** A container's name, or `spec.resources` for the Pod-level values. */
  readonly container: string;
  readonly field: string;
  readonly before: string | undefined;
  readonly after: string;
}

export interface PodLevelRepadding {
  /** The Pod resized, Pod-level values included: what its QoS class is computed from. */
  readonly pod: JsonObject;
  /** The Pod's `spec.resources` after the resize, when a value changes; undefined otherwise. */
  readonly resources: JsonObject | undefined;
  readonly changes: readonly ResizeChange[];
}

/**
 * The Pod-level `spec.resources` padded again (docs/design.md §14): the
 * injection padded each value the Pod sets by what the sidecars added to
 * its containers' aggregate, so a resize moves each by the change of that
 * addition: the padding with the sidecars as RESIZED less the padding with
 * them as they are, the same arithmetic as injection's (padPodResources),
 * both over the Pod without the containers OURS names, put back where they
 * are. Undefined `resources` when the Pod sets none; a problem when a value
 * cannot be padded.
 */
export function repadPodResources(pod: JsonObject, resized: JsonObject, ours: ReadonlySet<string>): PodLevelRepadding | string {
  const podResources = objectAt(objectAt(pod, 'spec'), 'resources');
  if (podResources === undefined) return { pod: resized, resources: undefined, changes: [] };
  const was = padPodResources(withoutOurs(pod, ours), addedOf(pod, ours));
  const will = padPodResources(withoutOurs(pod, ours), addedOf(resized, ours));
  if (was === undefined || will === undefined) return { pod: resized, resources: undefined, changes: [] };
  if (!was.ok) return `spec.resources: ${was.problem}`;
  if (!will.ok) return `spec.resources: ${will.problem}`;
  const paddedTo = (changes: typeof was.changes, field: string, before: string): string => changes.find((change) => change.field === field)?.after ?? before;
  const next: Record<string, Record<string, string>> = {};
  const changes: ResizeChange[] = [];
  for (const kind of ['requests', 'limits'] as const) {
    for (const [name, value] of Object.entries(objectAt(podResources, kind) ?? {})) {
      const text = String(value);
      next[kind] = { ...next[kind], [name]: text };
      const field = `spec.resources.${kind}.${name}`;
      const current = toMilli(text);
      const before = toMilli(paddedTo(was.changes, field, text));
      const after = toMilli(paddedTo(will.changes, field, text));
      if (current === undefined || before === undefined || after === undefined || before === after) continue;
      const moved = current + after - before;
      if (moved < 0n) return `${field}: ${text} would fall below zero`;
      const rendered = renderMilli(moved, milliFormat(text));
      next[kind] = { ...next[kind], [name]: rendered };
      changes.push({ container: 'spec.resources', field: `${kind}.${name}`, before: text, after: rendered });
    }
  }
  const resources = changes.length === 0 ? undefined : { ...podResources, ...next };
  const spec = objectAt(resized, 'spec') ?? {};
  return { pod: resources === undefined ? resized : { ...resized, spec: { ...spec, resources } }, resources, changes };
}

/** POD without the containers OURS names: what injection padded for. */
function withoutOurs(pod: JsonObject, ours: ReadonlySet<string>): JsonObject {
  const spec = objectAt(pod, 'spec') ?? {};
  const kept = (list: string) => (arrayAt(spec, list) ?? []).filter((entry) => !ours.has(entryName(entry) ?? ''));
  return { ...pod, spec: { ...spec, containers: kept('containers'), initContainers: kept('initContainers') } };
}

/** The containers OURS names, where injection put them: classic ones in containers, init ones before or after the Pod's own. */
function addedOf(pod: JsonObject, ours: ReadonlySet<string>): AddedContainers {
  const spec = objectAt(pod, 'spec');
  const isOurs = (entry: unknown): entry is JsonObject => isJsonObject(entry) && ours.has(entryName(entry) ?? '');
  const inits = arrayAt(spec, 'initContainers') ?? [];
  const firstOwn = inits.findIndex((entry) => !isOurs(entry));
  const split = firstOwn < 0 ? inits.length : firstOwn;
  return {
    containers: (arrayAt(spec, 'containers') ?? []).filter(isOurs),
    firstInits: inits.slice(0, split).filter(isOurs),
    lastInits: inits.slice(split).filter(isOurs).filter((entry) => own(entry, 'name') !== undefined),
  };
}
