import { AppsV1Api, CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import { ClusterError, TemplateError } from '../errors.js';
import { isIntermediateOwner, isRestartable, ownerKey, type OwnerRef, type PodRecord } from '../fleet/fleet-report.js';
import { controllerOf, toPodRecord } from '../fleet/pod-record.js';
import { isJsonObject, NAMESPACE_ANNOTATION_PREFIX, objectAt, parseTemplateData, stringAt, type JsonObject, type TemplateSet } from '../injection/index.js';
import { describeKubeError, kubeErrorStatus, listAllPages, type Collection } from './api/index.js';
import type { Labels } from './watches/index.js';

/** ReplicaSets, Jobs and Namespaces are read for their metadata only: owners and labels are all we need. */
const METADATA_LIST = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';
const METADATA_OBJECT = 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1';

export interface FleetQuery {
  /** One namespace, or undefined for all. */
  readonly namespace: string | undefined;
  readonly labelSelector: string | undefined;
  /** `limit` of each list request; the rest follows with `continue`. */
  readonly pageSize: number;
  /** Where the injector runs and its template ConfigMap lives. */
  readonly injectorNamespace: string;
  readonly configMapName: string;
}

/** Everything the report is built from, read in a handful of list calls. */
export interface FleetSnapshot {
  readonly templates: TemplateSet;
  /** `ConfigMap ns/name`. */
  readonly templateSource: string;
  readonly pods: readonly PodRecord[];
  readonly owners: ReadonlyMap<string, OwnerRef>;
  readonly namespaceLabels: ReadonlyMap<string, Labels>;
  /** Each namespace's `envoy-injector.io/` annotations (its proxy overrides' defaults, which a resize keeps), read with its labels. */
  readonly namespaceAnnotations: ReadonlyMap<string, Labels>;
  /** Lists that outlived the API server's history and were finished inconsistently (see listPaged). */
  readonly inconsistentLists: readonly string[];
  /**
   * When the namespace labels were refused (403): the namespace (undefined
   * for all of them) and the API server's message. The report then counts
   * un-injected Pods there as unknown rather than failing.
   */
  readonly namespaceLabelsForbidden: { readonly namespace: string | undefined; readonly message: string } | undefined;
}

/**
 * Reads the live template set, the Pods (paged), the controllers of the
 * ReplicaSets and Jobs that own them, and namespace labels. Owners are listed
 * once for the whole scope, never read Pod by Pod: a cluster of 50,000 Pods
 * costs about a hundred requests, not 50,000.
 */
export async function readFleet(kubeConfig: KubeConfig, query: FleetQuery): Promise<FleetSnapshot> {
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const { namespace } = query;
  const scope = namespace === undefined ? 'all namespaces' : `namespace ${namespace}`;
  const { templates, templateSource } = await readTemplates(core, query);

  const inconsistentLists: string[] = [];
  const listPaged = (what: string, collection: Collection, each: (item: JsonObject) => void, options: { accept?: string; labelSelector?: string | undefined } = {}) =>
    listAllPages(kubeConfig, what, { ...collection, namespace, pageSize: query.pageSize, ...options }, each, () => inconsistentLists.push(what));
  const pods: PodRecord[] = [];
  // `apps/ReplicaSet`, `batch/Job`: the intermediate owners some Pod has.
  const ownerKinds = new Set<string>();
  // Each Pod is cut down to its record as it arrives; the rest of it, and of its page, is let go at once.
  await listPaged(`listing Pods in ${scope}`, { prefix: '/api/v1', resource: 'pods' }, (pod) => {
    const record = toPodRecord(pod);
    if (record === undefined) return;
    pods.push(record);
    if (record.owner !== undefined && isIntermediateOwner(record.owner)) ownerKinds.add(record.owner.kind);
  }, { labelSelector: query.labelSelector });

  const owners = new Map<string, OwnerRef>();
  const addOwners = (apiVersion: string, kind: string) => (object: JsonObject): void => {
    const meta = objectAt(object, 'metadata');
    const name = stringAt(meta, 'name');
    const owner = controllerOf(meta);
    if (name !== undefined && owner !== undefined) owners.set(ownerKey(stringAt(meta, 'namespace') ?? '', { apiVersion, kind, name }), owner);
  };
  // Listed only when some Pod is owned by one.
  const ownerLists: [string, string, Collection][] = [
    ['apps/v1', 'ReplicaSet', { prefix: '/apis/apps/v1', resource: 'replicasets' }],
    ['batch/v1', 'Job', { prefix: '/apis/batch/v1', resource: 'jobs' }],
  ];
  for (const [apiVersion, kind, collection] of ownerLists) {
    if (ownerKinds.has(kind)) await listPaged(`listing ${kind}s in ${scope}`, collection, addOwners(apiVersion, kind), { accept: METADATA_LIST });
  }

  const namespaceLabels = new Map<string, Labels>();
  const namespaceAnnotations = new Map<string, Labels>();
  const addLabels = (meta: JsonObject | undefined): void => {
    const name = stringAt(meta, 'name');
    if (name === undefined) return;
    namespaceLabels.set(name, stringsAt(meta, 'labels') ?? {});
    namespaceAnnotations.set(name, Object.fromEntries(Object.entries(stringsAt(meta, 'annotations') ?? {}).filter(([key]) => key.startsWith(NAMESPACE_ANNOTATION_PREFIX))));
  };
  let namespaceLabelsForbidden: FleetSnapshot['namespaceLabelsForbidden'];
  try {
    if (namespace === undefined) await listPaged('listing Namespaces', { prefix: '/api/v1', resource: 'namespaces' }, (object) => addLabels(objectAt(object, 'metadata')), { accept: METADATA_LIST });
    else addLabels(asJsonObject((await core.readNamespace({ name: namespace }, setHeaderOptions('Accept', METADATA_OBJECT))).metadata));
  } catch (error) {
    const cause = error instanceof ClusterError && error.cause !== undefined ? error.cause : error;
    const status = kubeErrorStatus(cause);
    // No such namespace: no Pods either, and nothing to report.
    if (namespace !== undefined && status === 404) return { templates, templateSource, pods, owners, namespaceLabels, namespaceAnnotations, inconsistentLists, namespaceLabelsForbidden };
    // Labels are only needed for Pods without a status: one missing permission must not hide the rest.
    if (status !== 403) throw error instanceof ClusterError ? error : new ClusterError(`reading namespace ${namespace ?? ''}: ${describeKubeError(error)}`, { cause: error });
    namespaceLabelsForbidden = { namespace, message: describeKubeError(cause) };
  }
  return { templates, templateSource, pods, owners, namespaceLabels, namespaceAnnotations, inconsistentLists, namespaceLabelsForbidden };
}

export interface WorkloadRef {
  readonly namespace: string;
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
}

/** `kubectl rollout restart`'s annotation: a changed Pod template makes the controller roll its Pods. */
export const RESTARTED_AT_ANNOTATION = 'kubectl.kubernetes.io/restartedAt';

/** The change `kubectl rollout restart` makes: the Pod template's restartedAt annotation. */
/** FIELDMANAGER: `envoy-injector`; the rollout's is configurable, for GitOps tools that take fields over by manager (docs/fleet.md). */
export async function restartWorkload(kubeConfig: KubeConfig, workload: WorkloadRef, restartedAt: string, fieldManager = 'envoy-injector'): Promise<void> {
  const apps = kubeConfig.makeApiClient(AppsV1Api);
  const request = {
    name: workload.name,
    namespace: workload.namespace,
    body: { spec: { template: { metadata: { annotations: { [RESTARTED_AT_ANNOTATION]: restartedAt } } } } },
    fieldManager,
  };
  const strategicMerge = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);
  // Only apps/v1's own kinds: another group's Deployment of the same name is not this one.
  if (!isRestartable(workload)) throw new ClusterError(`${workload.apiVersion} ${workload.kind} ${workload.namespace}/${workload.name}: only apps/v1 Deployments, StatefulSets and DaemonSets are restarted`);
  try {
    if (workload.kind === 'Deployment') await apps.patchNamespacedDeployment(request, strategicMerge);
    else if (workload.kind === 'StatefulSet') await apps.patchNamespacedStatefulSet(request, strategicMerge);
    else if (workload.kind === 'DaemonSet') await apps.patchNamespacedDaemonSet(request, strategicMerge);
    else throw new ClusterError(`${workload.kind} ${workload.namespace}/${workload.name}: only Deployments, StatefulSets and DaemonSets are restarted`);
  } catch (error) {
    if (error instanceof ClusterError) throw error;
    throw new ClusterError(`restarting ${workload.kind} ${workload.namespace}/${workload.name}: ${describeKubeError(error)}`, { cause: error });
  }
}

async function readTemplates(core: CoreV1Api, query: FleetQuery): Promise<{ templates: TemplateSet; templateSource: string }> {
  const where = `ConfigMap ${query.injectorNamespace}/${query.configMapName}`;
  let data: Record<string, string>;
  try {
    data = (await core.readNamespacedConfigMap({ name: query.configMapName, namespace: query.injectorNamespace })).data ?? {};
  } catch (error) {
    const hint = kubeErrorStatus(error) === 404 ? ' (is the injector installed there? see --injector-namespace and --configmap)' : '';
    throw new ClusterError(`reading the templates, ${where}: ${describeKubeError(error)}${hint}`, { cause: error });
  }
  try {
    return { templates: parseTemplateData(data), templateSource: where };
  } catch (error) {
    // The injector keeps serving its last good set meanwhile, but which one is not for us to guess.
    if (error instanceof TemplateError) throw new TemplateError(error.problems.map((problem) => `${where}: ${problem}`));
    throw error;
  }
}

/** The string values of the map at `object[key]` (labels), or undefined when it has none. */
function stringsAt(object: JsonObject | undefined, key: string): Record<string, string> | undefined {
  const map = objectAt(object, key);
  if (map === undefined) return undefined;
  const strings: Record<string, string> = {};
  for (const [name, value] of Object.entries(map)) if (typeof value === 'string') strings[name] = value;
  return strings;
}

function asJsonObject(value: unknown): JsonObject | undefined {
  return isJsonObject(value) ? value : undefined;
}
