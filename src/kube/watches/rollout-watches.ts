import type { KubeConfig, KubernetesListObject, KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ownerKey, type OwnerRef, type PodRecord } from '../../fleet/fleet-report.js';
import { isInjectorAnnotation, toPodRecord } from '../../fleet/pod-record.js';
import { arrayAt, isJsonObject, objectAt, own, stringAt, type JsonObject } from '../../injection/index.js';
import { kubeJsonList, ResilientInformer, TrackedWatch, type Backoff, type WatchLiveness } from '../api/index.js';

type Cached = KubernetesObject & JsonObject;

const METADATA_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';
const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

/** The apps/v1 kinds the rollout rolls, and their collections. */
export const ROLLOUT_KINDS: readonly { readonly kind: string; readonly resource: string }[] = [
  { kind: 'Deployment', resource: 'deployments' },
  { kind: 'StatefulSet', resource: 'statefulsets' },
  { kind: 'DaemonSet', resource: 'daemonsets' },
];

/** The metadata every cached object keeps: name, namespace, uid, resourceVersion (the informer's), generation; the annotations KEEP says. */
function slimMetadata(metadata: JsonObject | undefined, keep: (key: string) => boolean): JsonObject {
  const kept: JsonObject = {};
  for (const field of ['name', 'namespace', 'uid', 'resourceVersion', 'generation', 'deletionTimestamp']) {
    const value = own(metadata ?? {}, field);
    if (value !== undefined) kept[field] = value;
  }
  const annotations = objectAt(metadata, 'annotations');
  if (annotations !== undefined) {
    const ours: JsonObject = {};
    for (const [key, value] of Object.entries(annotations)) if (keep(key)) ours[key] = value;
    if (Object.keys(ours).length > 0) kept['annotations'] = ours;
  }
  return kept;
}

/** What the report reads of a Pod (fleet-report.ts's PodRecord): names, our annotations, labels, controller, containers' names, hostNetwork, phase. */
export function slimRolloutPod(pod: unknown): unknown {
  if (!isJsonObject(pod)) return pod;
  const metadata = objectAt(pod, 'metadata');
  const spec = objectAt(pod, 'spec');
  const names = (list: string) => (arrayAt(spec, list) ?? []).flatMap((entry) => (isJsonObject(entry) && typeof entry['name'] === 'string' ? [{ name: entry['name'] }] : []));
  const controller = arrayAt(metadata, 'ownerReferences')?.find((reference) => isJsonObject(reference) && reference['controller'] === true);
  return {
    metadata: {
      ...slimMetadata(metadata, isInjectorAnnotation),
      ...(objectAt(metadata, 'labels') === undefined ? {} : { labels: objectAt(metadata, 'labels') }),
      ...(controller === undefined ? {} : { ownerReferences: [controller] }),
    },
    spec: { containers: names('containers'), initContainers: names('initContainers'), ...(spec?.['hostNetwork'] === true ? { hostNetwork: true } : {}) },
    status: { phase: stringAt(objectAt(pod, 'status'), 'phase') },
  };
}

/** A ReplicaSet's metadata: only its controller (its Deployment) matters. */
function slimOwned(object: unknown): unknown {
  if (!isJsonObject(object)) return object;
  const metadata = objectAt(object, 'metadata');
  const controller = arrayAt(metadata, 'ownerReferences')?.find((reference) => isJsonObject(reference) && reference['controller'] === true);
  return { metadata: { ...slimMetadata(metadata, () => false), ...(controller === undefined ? {} : { ownerReferences: [controller] }) } };
}

/** What the plan reads of a workload: our annotations, replicas, strategy, the Pod template's annotations and labels, the whole status. */
export function slimWorkload(object: unknown): unknown {
  if (!isJsonObject(object)) return object;
  const spec = objectAt(object, 'spec');
  const templateMetadata = objectAt(objectAt(spec, 'template'), 'metadata');
  const keptSpec: JsonObject = {};
  for (const field of ['replicas', 'updateStrategy', 'strategy', 'progressDeadlineSeconds', 'minReadySeconds']) {
    const value = own(spec ?? {}, field);
    if (value !== undefined) keptSpec[field] = value;
  }
  keptSpec['template'] = { metadata: { annotations: objectAt(templateMetadata, 'annotations') ?? {}, labels: objectAt(templateMetadata, 'labels') ?? {} } };
  return { metadata: slimMetadata(objectAt(object, 'metadata'), (key) => key.startsWith('envoy-injector.io/')), spec: keptSpec, status: objectAt(object, 'status') ?? {} };
}

export interface RolloutWatchOptions {
  readonly kubeConfig: KubeConfig;
  readonly backoff: Backoff;
  readonly watchLiveness?: Partial<WatchLiveness> | undefined;
  readonly log: Logger;
  /** Any event of any of the watches (the controller plans again, debounced). */
  readonly onChange: () => void;
}

/**
 * The leader's view of the fleet, from one LIST (`resourceVersion=0`, the
 * watch cache) and one WATCH per collection, kept up by ResilientInformer:
 * Pods (slimmed to what the report reads), ReplicaSets (metadata only: their
 * Deployment), Deployments, StatefulSets and DaemonSets (slimmed). At rest it
 * costs the API server the streams' renewals and nothing else; started when
 * this replica leads, stopped when it stops.
 */
export class RolloutWatches {
  readonly #pods: ResilientInformer<Cached>;
  readonly #replicaSets: ResilientInformer<Cached>;
  readonly #workloads: Map<string, ResilientInformer<Cached>>;

  constructor(options: RolloutWatchOptions) {
    this.#pods = collection(options, { name: 'Pods (rollout)', path: '/api/v1/pods', slim: slimRolloutPod });
    this.#replicaSets = collection(options, { name: 'ReplicaSets (rollout)', path: '/apis/apps/v1/replicasets', slim: slimOwned, metadataOnly: true });
    this.#workloads = new Map(ROLLOUT_KINDS.map(({ kind, resource }) => [kind, collection(options, { name: `${kind}s (rollout)`, path: `/apis/apps/v1/${resource}`, slim: slimWorkload })]));
  }

  #all(): ResilientInformer<Cached>[] {
    return [this.#pods, this.#replicaSets, ...this.#workloads.values()];
  }

  start(): void {
    for (const informer of this.#all()) informer.start();
  }

  stop(): void {
    for (const informer of this.#all()) informer.stop();
  }

  /** Every cache filled by a full list. */
  get hasSynced(): boolean {
    return this.#all().every((informer) => informer.hasSynced);
  }

  /** The cached Pods as the report reads them; finished and terminating ones left out, as `status` does. */
  podRecords(): PodRecord[] {
    return this.#pods.list().flatMap((pod) => {
      const record = toPodRecord(pod);
      return record === undefined ? [] : [record];
    });
  }

  /** The Deployment of each ReplicaSet, keyed by `ownerKey`, as fleet-report.ts's `owners`. */
  owners(): Map<string, OwnerRef> {
    const owners = new Map<string, OwnerRef>();
    for (const replicaSet of this.#replicaSets.list()) {
      const metadata = objectAt(replicaSet, 'metadata');
      const controller = arrayAt(metadata, 'ownerReferences')?.[0];
      if (!isJsonObject(controller)) continue;
      const owner = { apiVersion: stringAt(controller, 'apiVersion') ?? '', kind: stringAt(controller, 'kind') ?? '', name: stringAt(controller, 'name') ?? '' };
      owners.set(ownerKey(stringAt(metadata, 'namespace') ?? '', { apiVersion: 'apps/v1', kind: 'ReplicaSet', name: stringAt(metadata, 'name') ?? '' }), owner);
    }
    return owners;
  }

  /** Every cached Deployment, StatefulSet and DaemonSet, keyed by `ownerKey`. */
  workloads(): Map<string, JsonObject> {
    const objects = new Map<string, JsonObject>();
    for (const [kind, informer] of this.#workloads) {
      for (const object of informer.list()) {
        const metadata = objectAt(object, 'metadata');
        objects.set(ownerKey(stringAt(metadata, 'namespace') ?? '', { apiVersion: 'apps/v1', kind, name: stringAt(metadata, 'name') ?? '' }), object);
      }
    }
    return objects;
  }
}

function collection(options: RolloutWatchOptions, what: { name: string; path: string; slim: (object: unknown) => unknown; metadataOnly?: boolean }): ResilientInformer<Cached> {
  let informer: ResilientInformer<Cached> | undefined;
  const watch = new TrackedWatch(options.kubeConfig, {
    ...(what.metadataOnly === true ? { accept: METADATA_OBJECT } : {}),
    backoff: options.backoff,
    liveness: options.watchLiveness,
    slim: what.slim,
    onConnected: () => informer?.resetBackoff(),
  });
  informer = new ResilientInformer<Cached>({
    name: what.name,
    path: what.path,
    watch,
    // resourceVersion=0: from the API server's watch cache, not etcd, as client-go's reflector lists.
    list: async () => {
      const items: Cached[] = [];
      // Each item slimmed as it arrives (kubeJsonList): the whole list is never held as text or as full objects.
      const rest = await kubeJsonList(options.kubeConfig, { path: `${what.path}?resourceVersion=0`, ...(what.metadataOnly === true ? { accept: METADATA_LIST } : {}), timeoutMs: 60_000 }, (item) => {
        if (isJsonObject(item)) items.push(what.slim(item) as Cached);
      });
      if (!isJsonObject(rest)) throw new Error(`GET ${what.path}: not a list`);
      return { ...rest, items } as unknown as KubernetesListObject<Cached>;
    },
    backoff: options.backoff,
    log: options.log,
  });
  for (const verb of ['add', 'update', 'delete'] as const) informer.on(verb, () => options.onChange());
  return informer;
}

