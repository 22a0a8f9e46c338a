import { isJsonObject, own, stringAt, type JsonObject } from './basics/index.js';

/** Where each workload kind keeps its Pod template (a Pod is its own). */
const POD_TEMPLATE_PATHS: Readonly<Record<string, readonly string[]>> = {
  Pod: [],
  Deployment: ['spec', 'template'],
  StatefulSet: ['spec', 'template'],
  DaemonSet: ['spec', 'template'],
  ReplicaSet: ['spec', 'template'],
  ReplicationController: ['spec', 'template'],
  Job: ['spec', 'template'],
  CronJob: ['spec', 'jobTemplate', 'spec', 'template'],
};

export interface PodTemplateLocation {
  readonly kind: string;
  /** `metadata.name` of the object, or its generateName. */
  readonly name: string;
  readonly namespace: string | undefined;
  /** The Pod, or the workload's Pod template (`metadata` + `spec`). */
  readonly pod: JsonObject;
}

/** The Pod or Pod template of a manifest object; undefined for any other kind. */
export function findPodTemplate(object: JsonObject): PodTemplateLocation | undefined {
  const kind = stringAt(object, 'kind');
  const path = kind === undefined || !Object.hasOwn(POD_TEMPLATE_PATHS, kind) ? undefined : POD_TEMPLATE_PATHS[kind];
  if (kind === undefined || path === undefined) return undefined;
  let pod: JsonObject | undefined = object;
  for (const key of path) {
    const next: unknown = pod === undefined ? undefined : own(pod, key);
    pod = isJsonObject(next) ? next : undefined;
  }
  if (pod === undefined) return undefined;
  const metadata = own(object, 'metadata');
  const objectMetadata = isJsonObject(metadata) ? metadata : undefined;
  return {
    kind,
    name: stringAt(objectMetadata, 'name') ?? stringAt(objectMetadata, 'generateName') ?? '',
    namespace: stringAt(objectMetadata, 'namespace'),
    pod,
  };
}

/** A copy of `object` with its Pod (template) replaced; the input is not mutated. */
export function replacePodTemplate(object: JsonObject, pod: JsonObject): JsonObject {
  const kind = stringAt(object, 'kind');
  const path = kind === undefined ? undefined : POD_TEMPLATE_PATHS[kind];
  if (path === undefined) return object;
  return replaceAt(object, path, pod);
}

function replaceAt(object: JsonObject, path: readonly string[], value: JsonObject): JsonObject {
  const [head, ...rest] = path;
  if (head === undefined) return value;
  const child = own(object, head);
  return { ...object, [head]: replaceAt(isJsonObject(child) ? child : {}, rest, value) };
}
