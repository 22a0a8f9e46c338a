import {
  Annotations,
  arrayAt,
  DEFAULT_ALLOWED_OVERRIDES,
  entryName,
  isJsonObject,
  objectAt,
  own,
  readStatusAnnotation,
  resolveOverrides,
  stringAt,
  toMilli,
  type JsonObject,
  type OverrideName,
  type SidecarTemplate,
  type TemplateSet,
} from '../injection/index.js';
import { podQosClass } from './pod-qos.js';
import { repadPodResources, type ResizeChange } from './resize-pod-level.js';

export type { ResizeChange } from './resize-pod-level.js';

/**
 * Resizing an injected Pod's proxy in place (docs/design.md §6, docs/fleet.md):
 * what the `resize` subresource must be sent so that the sidecars the
 * injector added carry the live template's CPU and memory, or why the Pod
 * must be restarted instead. Pure: the I/O is kube/pod-resize.ts, called by
 * `status --resize` and the rollout controller alike, one Pod at a time.
 */

/** The two resources the API server resizes in place (any other is refused: "only cpu and memory resources are mutable"). */
export const RESIZED_RESOURCES = ['cpu', 'memory'] as const;
const KINDS = ['requests', 'limits'] as const;

/** The Pod conditions by which the kubelet says a resize is not (yet) applied (KEP-1287, 1.33+). */
export const ResizeCondition = { pending: 'PodResizePending', inProgress: 'PodResizeInProgress' } as const;

export type PodResizePlan =
  /** Injected with the live template already: nothing to do. */
  | { readonly kind: 'current' }
  /**
   * Send BODY (a strategic merge patch) to `pods/resize` (none when the spec
   * already holds the values: a resize done before the status was written),
   * then write STATUS into the status annotation, replacing PREVIOUS.
   */
  | { readonly kind: 'resize'; readonly body: JsonObject | undefined; readonly changes: readonly ResizeChange[]; readonly status: string; readonly previousStatus: string; readonly restartsContainers: readonly string[] }
  /** The kubelet has not applied the last resize: reported, never sent again (the same values would change nothing). */
  | { readonly kind: 'pending'; readonly condition: string; readonly reason: string; readonly message: string }
  /** Only a restart brings it current: another template, another content, or a change the API server refuses in place. */
  | { readonly kind: 'restart'; readonly why: string };

export interface ResizeContext {
  readonly templates: TemplateSet;
  /** The server's `--allowed-overrides`: the proxy keeps the Pod's and its namespace's overrides as injection applies them. */
  readonly allowedOverrides?: readonly OverrideName[];
  /** The Pod's namespace's annotations (its `envoy-injector.io/proxy-*` defaults); undefined when unknown. */
  readonly namespaceAnnotations?: Readonly<Record<string, string>> | undefined;
}

/** What a Pod's status annotation says of its template: name, hash, and hash without CPU and memory (absent before issue 52). */
function statusFields(status: JsonObject): { template: string; hash: string; hashWithoutResources: string | undefined } | undefined {
  const template = stringAt(status, 'template');
  const hash = stringAt(status, 'hash');
  return template === undefined || hash === undefined ? undefined : { template, hash, hashWithoutResources: stringAt(status, 'hashWithoutResources') };
}

/**
 * The plan for one Pod (as stored: its spec's resources, its status's
 * conditions). A Pod differs from the live template only in resources when
 * its status's `hashWithoutResources` is the live template's: then the
 * added sidecars get the template's CPU and memory (with the proxy's
 * overrides), the Pod-level `spec.resources` are padded again, and the QoS
 * class must stay as it is.
 */
export function planPodResize(pod: JsonObject, context: ResizeContext): PodResizePlan {
  const statusText = own(objectAt(objectAt(pod, 'metadata'), 'annotations') ?? {}, Annotations.status);
  const status = readStatusAnnotation(pod);
  const fields = status === undefined ? undefined : statusFields(status);
  if (status === undefined || fields === undefined || typeof statusText !== 'string') return { kind: 'restart', why: 'its status annotation cannot be read' };
  const live = context.templates.templates.get(fields.template);
  if (live === undefined) return { kind: 'restart', why: `template "${fields.template}" is no longer in the ConfigMap` };
  if (live.hash === fields.hash) return { kind: 'current' };
  if (fields.hashWithoutResources === undefined) return { kind: 'restart', why: 'injected before the status recorded hashWithoutResources: whether only resources changed cannot be told' };
  if (fields.hashWithoutResources !== live.hashWithoutResources) return { kind: 'restart', why: 'the template changed in more than CPU and memory' };
  const pending = pendingResize(pod);
  if (pending !== undefined) return pending;
  const named = new Set(['containers', 'initContainers'].flatMap((list) => (arrayAt(status, list) ?? []).filter((name): name is string => typeof name === 'string')));
  const targets = targetContainers(pod, named, live, context);
  if (typeof targets === 'string') return { kind: 'restart', why: targets };
  const changes: ResizeChange[] = targets.flatMap((target) => target.changes);
  const resized = applyTargets(pod, targets);
  const podLevel = repadPodResources(pod, resized, named);
  if (typeof podLevel === 'string') return { kind: 'restart', why: podLevel };
  changes.push(...podLevel.changes);
  const qosBefore = stringAt(objectAt(pod, 'status'), 'qosClass') ?? podQosClass(pod);
  const qosAfter = podQosClass(podLevel.pod);
  if (qosBefore === undefined || qosAfter === undefined) return { kind: 'restart', why: 'its QoS class cannot be computed (a resource value that is no quantity)' };
  if (qosAfter !== qosBefore) return { kind: 'restart', why: `the template's resources would change its QoS class from ${qosBefore} to ${qosAfter}, which the API server refuses in place` };
  const next = JSON.stringify({ ...status, hash: live.hash, hashWithoutResources: live.hashWithoutResources });
  return {
    kind: 'resize',
    body: changes.length === 0 ? undefined : resizeBody(targets, podLevel.resources),
    changes,
    status: next,
    previousStatus: statusText,
    restartsContainers: targets.filter((target) => target.restarts).map((target) => target.name),
  };
}

/** A resize the kubelet has not applied, from the Pod's conditions (PodResizePending: Deferred, Infeasible; PodResizeInProgress). */
export function pendingResize(pod: JsonObject): Extract<PodResizePlan, { kind: 'pending' }> | undefined {
  for (const condition of (arrayAt(objectAt(pod, 'status'), 'conditions') ?? []).filter(isJsonObject)) {
    const type = stringAt(condition, 'type');
    if ((type === ResizeCondition.pending || type === ResizeCondition.inProgress) && stringAt(condition, 'status') === 'True') {
      return { kind: 'pending', condition: type, reason: stringAt(condition, 'reason') ?? '', message: stringAt(condition, 'message') ?? '' };
    }
  }
  return undefined;
}

interface ContainerTarget {
  readonly name: string;
  readonly list: 'containers' | 'initContainers';
  /** The container's resources after the resize. */
  readonly resources: JsonObject;
  readonly changes: readonly ResizeChange[];
  /** Its resizePolicy restarts it for a resource that changes. */
  readonly restarts: boolean;
}

/**
 * Each sidecar the status names that runs for the Pod's life (a container,
 * or an init container with `restartPolicy: Always`) and that the live
 * template holds, with the template's CPU and memory; or why not in place.
 * Init containers that ran to completion (envoy-init, the template's own)
 * are left as they ran: 1.34 refuses their resize, and they hold nothing
 * once finished.
 */
function targetContainers(pod: JsonObject, named: ReadonlySet<string>, live: SidecarTemplate, context: ResizeContext): ContainerTarget[] | string {
  const spec = objectAt(pod, 'spec');
  const proxy = live.containers[0];
  const proxyName = entryName(proxy);
  const overrides = resolveOverrides(objectAt(objectAt(pod, 'metadata'), 'annotations'), proxy, context.allowedOverrides ?? DEFAULT_ALLOWED_OVERRIDES, {
    name: stringAt(objectAt(pod, 'metadata'), 'namespace') ?? '',
    annotations: context.namespaceAnnotations,
  });
  const targets: ContainerTarget[] = [];
  for (const list of ['containers', 'initContainers'] as const) {
    for (const container of (arrayAt(spec, list) ?? []).filter(isJsonObject)) {
      const name = entryName(container);
      if (name === undefined || !named.has(name)) continue;
      if (list === 'initContainers' && own(container, 'restartPolicy') !== 'Always') continue;
      const wanted = [...live.containers, ...live.initContainers].find((entry) => entryName(entry) === name);
      if (wanted === undefined) continue;
      const target = targetOf(container, list, name === proxyName ? overrides.apply(wanted) : wanted);
      if (typeof target === 'string') return `${name}: ${target}`;
      targets.push(target);
    }
  }
  return targets;
}

/** One container's resources after the resize: CPU and memory as WANTED (the template's entry) says, the rest as they are. */
function targetOf(container: JsonObject, list: ContainerTarget['list'], wanted: JsonObject): ContainerTarget | string {
  const name = entryName(container) ?? '';
  const current = objectAt(container, 'resources') ?? {};
  const next = objectAt(wanted, 'resources') ?? {};
  const resources: Record<string, JsonObject> = {};
  const changes: ResizeChange[] = [];
  for (const kind of KINDS) {
    const amounts: Record<string, string> = {};
    for (const [key, value] of Object.entries(objectAt(current, kind) ?? {})) if (typeof value === 'string') amounts[key] = value;
    for (const resource of RESIZED_RESOURCES) {
      const before = own(objectAt(current, kind) ?? {}, resource);
      // The API server defaults a request to its limit: the template's request, else its limit.
      const after = own(objectAt(next, kind) ?? {}, resource) ?? (kind === 'requests' ? own(objectAt(next, 'limits') ?? {}, resource) : undefined);
      if (after === undefined) {
        if (before !== undefined) return `the template has no ${kind}.${resource}, and the API server removes none in place`;
        continue;
      }
      const afterText = String(after);
      const same = before !== undefined && toMilli(String(before)) !== undefined && toMilli(String(before)) === toMilli(afterText);
      if (!same) changes.push({ container: name, field: `${kind}.${resource}`, before: before === undefined ? undefined : String(before), after: afterText });
      amounts[resource] = same ? String(before) : afterText;
    }
    if (Object.keys(amounts).length > 0) resources[kind] = amounts;
  }
  const changed = new Set(changes.map((change) => change.field.slice(change.field.indexOf('.') + 1)));
  const restarts = (arrayAt(container, 'resizePolicy') ?? []).filter(isJsonObject).some((policy) => changed.has(String(own(policy, 'resourceName'))) && own(policy, 'restartPolicy') === 'RestartContainer');
  return { name, list, resources, changes, restarts };
}

/** POD with each target's resources in place: what the Pod-level padding and the QoS class are computed from. */
function applyTargets(pod: JsonObject, targets: readonly ContainerTarget[]): JsonObject {
  const spec = objectAt(pod, 'spec') ?? {};
  const byName = new Map(targets.map((target) => [`${target.list}/${target.name}`, target]));
  const replaced = (list: string) => (arrayAt(spec, list) ?? []).map((entry) => {
    const target = byName.get(`${list}/${entryName(entry) ?? ''}`);
    return target === undefined || !isJsonObject(entry) ? entry : { ...entry, resources: target.resources };
  });
  return { ...pod, spec: { ...spec, containers: replaced('containers'), initContainers: replaced('initContainers') } };
}

/** The strategic merge patch for `pods/resize`: each changed container by name, and the Pod-level values when they change. */
function resizeBody(targets: readonly ContainerTarget[], podResources: JsonObject | undefined): JsonObject {
  const spec: JsonObject = {};
  for (const list of ['containers', 'initContainers'] as const) {
    const entries = targets.filter((target) => target.list === list && target.changes.length > 0).map((target) => ({ name: target.name, resources: target.resources }));
    if (entries.length > 0) spec[list] = entries;
  }
  if (podResources !== undefined) spec['resources'] = podResources;
  return { spec };
}
