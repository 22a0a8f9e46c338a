import { arrayAt, isJsonObject, jsonPointer, MAX_MILLI, milliFormat, objectAt, own, renderMilli, toMilli, type JsonObject, type JsonValue } from '../basics/index.js';

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
 * sum. A container's request defaults to its limit, and every value is
 * rounded up to 1m (`SetDefaults_ResourceList`), as the API server does after
 * our patch. The application keeps the room between its own aggregate and
 * what it asked for. A Pod-level limit is raised to the padded request and to
 * an injected container's limit it would be below; a request equal to its
 * limit (the Pod's QoS is Guaranteed at the Pod level) stays equal to it.
 * Only the resources an added container requests or limits are looked at.
 * The arithmetic is policy mode's, in thousandths (milli-quantity.ts), so
 * that both modes pad alike and skip alike.
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

/** The most containers, and init containers, a Pod padded may have once injected (policy mode's CEL cost limit). */
export const MAX_PADDED_CONTAINERS = 250;
export const MAX_PADDED_INIT_CONTAINERS = 100;

type Kind = 'requests' | 'limits';
const KINDS = ['requests', 'limits'] as const;

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
  // A resource no added container has a request or limit of (other than 0) adds nothing to any aggregate: left as it is.
  const addedAll = [...added.containers, ...added.firstInits, ...added.lastInits];
  const carried = (name: string): boolean => addedAll.some((container) => KINDS.some((kind) => amount(container, kind, name) !== 0n));
  const names = [...new Set([...Object.keys(set.requests), ...Object.keys(set.limits)])].filter(carried);
  // Policy mode's CEL cost grows with the lists (and with init containers times native sidecars): bounded alike in both modes.
  if (names.length > 0 && (after.containers.length > MAX_PADDED_CONTAINERS || after.inits.length > MAX_PADDED_INIT_CONTAINERS)) {
    return { ok: false, problem: `more than ${MAX_PADDED_CONTAINERS} containers or ${MAX_PADDED_INIT_CONTAINERS} init containers once injected (${after.containers.length} and ${after.inits.length}), more than both modes pad` };
  }
  const patch: { path: string; value: JsonValue }[] = [];
  const changes: ResourceChange[] = [];
  for (const name of names) {
    const padded = padOne(name, set, before, after, added.containers);
    if (typeof padded === 'string') return { ok: false, problem: padded };
    for (const kind of KINDS) {
      const value = padded[kind];
      const text = own(set[kind], name);
      if (value === undefined || value === text) continue;
      patch.push({ path: jsonPointer('spec', 'resources', kind, name), value });
      changes.push({ field: `spec.resources.${kind}.${name}`, before: String(text), after: value });
    }
  }
  return { ok: true, patch, changes };
}

const max = (a: bigint, b: bigint): bigint => (a >= b ? a : b);

/** The padded texts of one resource's request and limit (those the Pod sets), or why there are none. */
function padOne(
  name: string,
  set: Readonly<Record<Kind, JsonObject>>,
  before: { containers: readonly JsonObject[]; inits: readonly JsonObject[] },
  after: { containers: readonly JsonObject[]; inits: readonly JsonObject[] },
  addedContainers: readonly JsonObject[],
): { requests?: string; limits?: string } | string {
  const given: Partial<Record<Kind, { text: string; milli: bigint }>> = {};
  for (const kind of KINDS) {
    const text = own(set[kind], name);
    if (text === undefined) continue;
    const milli = typeof text === 'string' || typeof text === 'number' ? toMilli(text) : undefined;
    if (milli === undefined) return `spec.resources.${kind}.${name}: ${unpaddable(text)}`;
    given[kind] = { text: String(text), milli };
  }
  const delta: Record<Kind, bigint> = { requests: 0n, limits: 0n };
  for (const kind of KINDS) {
    const is = aggregate(name, kind, after);
    if (typeof is === 'string') return is;
    const was = aggregate(name, kind, before);
    if (typeof was === 'string') return was;
    delta[kind] = is - was;
  }
  // The API server checks only the regular containers' limits against the Pod's.
  let injectedLimit = 0n;
  for (const container of addedContainers) {
    const limit = amount(container, 'limits', name);
    if (typeof limit === 'string') return limit;
    injectedLimit = max(injectedLimit, limit);
  }
  const request = given.requests;
  const limit = given.limits;
  let newRequest = request === undefined ? undefined : request.milli + delta.requests;
  let newLimit = limit === undefined ? undefined : max(limit.milli + delta.limits, injectedLimit);
  if (newLimit !== undefined && newRequest !== undefined) {
    newLimit = max(newLimit, newRequest);
    // Guaranteed at the Pod level stays Guaranteed: request and limit move together.
    if (request !== undefined && limit !== undefined && request.milli === limit.milli) newRequest = newLimit;
  }
  const texts: { requests?: string; limits?: string } = {};
  for (const [kind, value, original] of [['requests', newRequest, request], ['limits', newLimit, limit]] as const) {
    if (value === undefined || original === undefined) continue;
    if (value === original.milli) texts[kind] = original.text;
    else if (value > MAX_MILLI) return `spec.resources.${kind}.${name}: ${original.text} padded would reach 10^15 or more`;
    else texts[kind] = renderMilli(value, milliFormat(original.text));
  }
  return texts;
}

/**
 * What a Pod's containers aggregate to for one resource, in thousandths
 * (AggregateContainerRequests/Limits), or a problem: an amount out of the
 * forms taken, or all of them together at 10^15 or more.
 */
function aggregate(name: string, kind: Kind, lists: { containers: readonly JsonObject[]; inits: readonly JsonObject[] }): bigint | string {
  let total = 0n;
  let sum = 0n;
  for (const container of lists.containers) {
    const value = amount(container, kind, name);
    if (typeof value === 'string') return value;
    sum += value;
    total += value;
  }
  let sidecars = 0n;
  let inits = 0n;
  for (const container of lists.inits) {
    const value = amount(container, kind, name);
    if (typeof value === 'string') return value;
    total += value;
    // A restartable init container (a native sidecar) runs beside everything after it.
    if (own(container, 'restartPolicy') === 'Always') {
      sum += value;
      sidecars += value;
    } else inits = max(inits, value + sidecars);
  }
  if (total > MAX_MILLI) return `resources.${kind}.${name} of all containers together reach 10^15 or more`;
  return max(sum, inits);
}

/**
 * A container's amount of one resource in thousandths as the API server sees
 * it after defaulting (a request defaults to the limit, every value is
 * rounded up to 1m), 0 when it has none; or a problem.
 */
function amount(container: JsonObject, kind: Kind, name: string): bigint | string {
  const resources = objectAt(container, 'resources');
  const read = (from: Kind): JsonValue | undefined => own(objectAt(resources, from) ?? {}, name);
  const text = kind === 'requests' ? (read('requests') ?? read('limits')) : read('limits');
  if (text === undefined) return 0n;
  const milli = typeof text === 'string' || typeof text === 'number' ? toMilli(text) : undefined;
  if (milli === undefined) return `${String(own(container, 'name'))}: resources.${kind}.${name}: ${unpaddable(text)}`;
  return milli;
}

function unpaddable(text: JsonValue): string {
  return `${typeof text === 'string' ? text : JSON.stringify(text)} is not a quantity both modes pad (unsigned, at most 18 digits, a binary suffix after at most 3 decimals, an exponent of at most 2 digits, below 10^15)`;
}

function objects(list: readonly JsonValue[] | undefined): JsonObject[] {
  return (list ?? []).filter(isJsonObject);
}
