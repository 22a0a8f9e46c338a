import { Annotations, arrayAt, isJsonObject, objectAt, own, stringAt, type JsonObject } from '../injection/index.js';
import type { OwnerRef, PodRecord } from './fleet-report.js';

/**
 * The few fields the report reads, from a Pod as listed (`status`) or as the
 * rollout's watch keeps it. Pods that finished (Succeeded, Failed) or are
 * being deleted run no sidecar worth reporting, and a rollout in progress
 * would otherwise count its terminating Pods as outdated.
 */
export function toPodRecord(pod: JsonObject): PodRecord | undefined {
  const meta = objectAt(pod, 'metadata');
  const name = stringAt(meta, 'name');
  const phase = stringAt(objectAt(pod, 'status'), 'phase');
  if (meta === undefined || name === undefined || own(meta, 'deletionTimestamp') !== undefined || phase === 'Succeeded' || phase === 'Failed') return undefined;
  const annotations: Record<string, string> = {};
  for (const [key, value] of Object.entries(objectAt(meta, 'annotations') ?? {})) {
    // Only what the injector reads: other annotations (last-applied-configuration...) can be large.
    if (typeof value === 'string' && isInjectorAnnotation(key)) annotations[key] = value;
  }
  const labels: Record<string, string> = {};
  for (const [key, value] of Object.entries(objectAt(meta, 'labels') ?? {})) if (typeof value === 'string') labels[key] = value;
  const spec = objectAt(pod, 'spec');
  // Container names only: a status naming others was copied into the Pod (fleet-report.ts, copiedMarks).
  const containers = ['containers', 'initContainers'].flatMap((list) => (arrayAt(spec, list) ?? []).flatMap((entry) => {
    const container = isJsonObject(entry) ? stringAt(entry, 'name') : undefined;
    return container === undefined ? [] : [container];
  }));
  const namespace = stringAt(meta, 'namespace') ?? '';
  const resizeFacts = Object.hasOwn(annotations, Annotations.status) ? resizeFactsOf(pod, { name, namespace, annotations }) : undefined;
  return { namespace, name, owner: controllerOf(meta), annotations, labels, containers, hostNetwork: spec?.['hostNetwork'] === true, ...(resizeFacts === undefined ? {} : { resizeFacts }) };
}

/** The fields of a container a resize reads. */
const RESIZE_CONTAINER_FIELDS = ['name', 'resources', 'restartPolicy', 'resizePolicy'];

/**
 * A Pod with our status cut down to what resizing it in place reads
 * (fleet/resize-plan.ts): small, so that the report of 50,000 Pods still fits.
 */
function resizeFactsOf(pod: JsonObject, metadata: JsonObject): JsonObject {
  const spec = objectAt(pod, 'spec');
  const status = objectAt(pod, 'status');
  const containers = (list: string): JsonObject[] => (arrayAt(spec, list) ?? []).filter(isJsonObject).map((container) =>
    Object.fromEntries(RESIZE_CONTAINER_FIELDS.flatMap((field) => (container[field] === undefined ? [] : [[field, container[field]]]))) as JsonObject);
  const resources = objectAt(spec, 'resources');
  const conditions = (arrayAt(status, 'conditions') ?? []).filter((condition) => isJsonObject(condition) && String(condition['type']).startsWith('PodResize'));
  const qosClass = stringAt(status, 'qosClass');
  return {
    metadata,
    spec: { containers: containers('containers'), initContainers: containers('initContainers'), ...(resources === undefined ? {} : { resources }) },
    status: { conditions, ...(qosClass === undefined ? {} : { qosClass }) },
  };
}

/** The annotations a PodRecord keeps: ours, and the seed's opt-in. */
export function isInjectorAnnotation(key: string): boolean {
  return key.startsWith('envoy-injector.io/') || key === Annotations.legacyInject;
}

/** The controller owner (`controller: true`) of an object's metadata, if any. */
export function controllerOf(meta: JsonObject | undefined): OwnerRef | undefined {
  const owner = arrayAt(meta, 'ownerReferences')?.find((reference) => isJsonObject(reference) && reference['controller'] === true);
  if (!isJsonObject(owner)) return undefined;
  return { apiVersion: stringAt(owner, 'apiVersion') ?? '', kind: stringAt(owner, 'kind') ?? '', name: stringAt(owner, 'name') ?? '' };
}
