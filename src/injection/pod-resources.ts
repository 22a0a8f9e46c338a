import { arrayAt, isJsonObject, objectAt, own, type JsonObject, type JsonValue } from './json.js';
import { jsonPointer } from './json-pointer.js';
import { addQuantities, canonicalQuantity, maxQuantity, parseKubeQuantity, roundUp, subtractQuantities, ZERO, type KubeQuantity } from './kube-quantity.js';
import { compareQuantities, type Quantity } from './quantity.js';

/**
 * Pod-level resources (`spec.resources`, KEP-2837; beta and on since 1.34).
 * The API server refuses a Pod whose Pod-level requests are below what its
 * containers aggregate to, or one of whose containers has a limit above the
 * Pod-level limit (`validatePodResourceConsistency`), and it validates after
 * every mutation. So each value the Pod sets is padded by what the injected
 * containers add to the aggregate, computed as the API server computes it
 * (component-helpers `AggregateContainerRequests`/`Limits`): containers and
 * restartable init containers (sidecars) add up; a regular init container
 * counts with the sidecars before it, and the largest of those wins over the
 * sum. A container's request defaults to its limit, and every CPU value is
 * rounded up to 1m (`SetDefaults_ResourceList`), as the API server does after
 * our patch. The application keeps the room between its own aggregate and
 * what it asked for. A Pod-level limit is raised to the padded request and to
 * an injected container's limit it would be below; a request equal to its
 * limit (the Pod's QoS is Guaranteed at the Pod level) stays equal to it.
 */

export interface ResourceChange {
  /** `spec.resources.requests.cpu`, ... */
  readonly field: string;
  readonly before: string;
  readonly after: string;
}

export type PodResourcesPadding =
  | { readonly ok: true; readonly patch: readonly { readonly path: string; readonly value: JsonValue }[]; readonly changes: readonly ResourceChange[] }
  | { readonly ok: false; readonly problem: string };

/** The containers the merge adds, where it adds them. */
export interface AddedContainers {
  readonly containers: readonly JsonObject[];
  /** Put before the Pod's own init containers (native sidecars, and capture's envoy-init with them). */
  readonly firstInits: readonly JsonObject[];
  /** Put after them. */
  readonly lastInits: readonly JsonObject[];
}

type Kind = 'requests' | 'limits';

/** The padding of the Pod's `spec.resources`; undefined when the Pod sets none (or the merge adds no container). */
export function padPodResources(pod: JsonObject, added: AddedContainers): PodResourcesPadding | undefined {
  const spec = objectAt(pod, 'spec');
  const resources = objectAt(spec, 'resources');
  if (resources === undefined) return undefined;
  const ownContainers = objects(arrayAt(spec, 'containers'));
  const ownInits = objects(arrayAt(spec, 'initContainers'));
  const before = { containers: ownContainers, inits: ownInits };
  const after = { containers: [...ownContainers, ...added.containers], inits: [...added.firstInits, ...ownInits, ...added.lastInits] };
  const set = { requests: objectAt(resources, 'requests') ?? {}, limits: objectAt(resources, 'limits') ?? {} };
  const names = [...new Set([...Object.keys(set.requests), ...Object.keys(set.limits)])];
  const patch: { path: string; value: JsonValue }[] = [];
  const changes: ResourceChange[] = [];
  for (const name of names) {
    const padded = padOne(name, set, before, after, added.containers);
    if (typeof padded === 'string') return { ok: false, problem: padded };
    for (const kind of ['requests', 'limits'] as const) {
      const value = padded[kind];
      const text = own(set[kind], name);
      if (value === undefined || value === text) continue;
      patch.push({ path: jsonPointer('spec', 'resources', kind, name), value });
      changes.push({ field: `spec.resources.${kind}.${name}`, before: String(text), after: value });
    }
  }
  return { ok: true, patch, changes };
}

/** The padded texts of one resource's request and limit (those the Pod sets), or why there are none. */
function padOne(
  name: string,
  set: Readonly<Record<Kind, JsonObject>>,
  before: { containers: readonly JsonObject[]; inits: readonly JsonObject[] },
  after: { containers: readonly JsonObject[]; inits: readonly JsonObject[] },
  addedContainers: readonly JsonObject[],
): { requests?: string; limits?: string } | string {
  const given: Partial<Record<Kind, KubeQuantity>> = {};
  for (const kind of ['requests', 'limits'] as const) {
    const text = own(set[kind], name);
    if (text === undefined) continue;
    const parsed = typeof text === 'string' || typeof text === 'number' ? parseKubeQuantity(text) : undefined;
    if (parsed === undefined) return `spec.resources.${kind}.${name}: ${JSON.stringify(text)} is not a quantity`;
    given[kind] = parsed;
  }
  const delta: Record<Kind, Quantity> = { requests: ZERO, limits: ZERO };
  for (const kind of ['requests', 'limits'] as const) {
    const was = aggregate(name, kind, before);
    const is = aggregate(name, kind, after);
    if (typeof was === 'string') return was;
    if (typeof is === 'string') return is;
    delta[kind] = subtractQuantities(is, was);
  }
  // The API server checks only the regular containers' limits against the Pod's.
  let injectedLimit = ZERO;
  for (const container of addedContainers) {
    const limit = amount(container, 'limits', name);
    if (typeof limit === 'string') return limit;
    if (limit !== undefined) injectedLimit = maxQuantity(injectedLimit, limit);
  }
  const request = given.requests;
  const limit = given.limits;
  let newRequest = request === undefined ? undefined : addQuantities(request.value, delta.requests);
  let newLimit = limit === undefined ? undefined : maxQuantity(addQuantities(limit.value, delta.limits), injectedLimit);
  if (newLimit !== undefined && newRequest !== undefined) {
    newLimit = maxQuantity(newLimit, newRequest);
    // Guaranteed at the Pod level stays Guaranteed: request and limit move together.
    if (request !== undefined && limit !== undefined && compareQuantities(request.value, limit.value) === 0) newRequest = newLimit;
  }
  const texts: { requests?: string; limits?: string } = {};
  for (const [kind, value, original] of [['requests', newRequest, request], ['limits', newLimit, limit]] as const) {
    if (value === undefined || original === undefined) continue;
    if (compareQuantities(value, original.value) === 0) {
      texts[kind] = String(own(set[kind], name));
      continue;
    }
    const text = canonicalQuantity(value, original.format);
    if (text === undefined) return `spec.resources.${kind}.${name}: ${String(own(set[kind], name))} padded to ${value.numerator}/${value.denominator} is no quantity the API server keeps as written`;
    texts[kind] = text;
  }
  return texts;
}

/** What a Pod's containers aggregate to for one resource (AggregateContainerRequests/Limits), or a problem. */
function aggregate(name: string, kind: Kind, lists: { containers: readonly JsonObject[]; inits: readonly JsonObject[] }): Quantity | string {
  let sum = ZERO;
  for (const container of lists.containers) {
    const value = amount(container, kind, name);
    if (typeof value === 'string') return value;
    if (value !== undefined) sum = addQuantities(sum, value);
  }
  let sidecars = ZERO;
  let inits = ZERO;
  for (const container of lists.inits) {
    const value = amount(container, kind, name);
    if (typeof value === 'string') return value;
    // A restartable init container (a native sidecar) runs beside everything after it.
    if (own(container, 'restartPolicy') === 'Always') {
      sum = addQuantities(sum, value ?? ZERO);
      sidecars = addQuantities(sidecars, value ?? ZERO);
      inits = maxQuantity(inits, sidecars);
    } else inits = maxQuantity(inits, addQuantities(value ?? ZERO, sidecars));
  }
  return maxQuantity(sum, inits);
}

/**
 * A container's amount of one resource as the API server sees it after
 * defaulting: a request defaults to the limit, CPU is rounded up to 1m.
 */
function amount(container: JsonObject, kind: Kind, name: string): Quantity | undefined | string {
  const resources = objectAt(container, 'resources');
  const read = (from: Kind): JsonValue | undefined => own(objectAt(resources, from) ?? {}, name);
  const text = kind === 'requests' ? (read('requests') ?? read('limits')) : read('limits');
  if (text === undefined) return undefined;
  const parsed = typeof text === 'string' || typeof text === 'number' ? parseKubeQuantity(text) : undefined;
  if (parsed === undefined) return `${String(own(container, 'name'))}: resources.${kind}.${name}: ${JSON.stringify(text)} is not a quantity`;
  return name === 'cpu' ? roundUp(parsed.value, 1000n) : parsed.value;
}

function objects(list: readonly JsonValue[] | undefined): JsonObject[] {
  return (list ?? []).filter(isJsonObject);
}
