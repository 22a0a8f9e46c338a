import { AppsV1Api, BatchV1Api, CoreV1Api, KubeConfig, PatchStrategy, setHeaderOptions, type V1ObjectMeta, type V1Pod } from '@kubernetes/client-node';
import { ClusterError, TemplateError } from '../errors.js';
import { isIntermediateOwner, isRestartable, ownerKey, type OwnerRef, type PodRecord } from '../fleet/fleet-report.js';
import { Annotations, parseTemplateData, type TemplateSet } from '../injection/index.js';
import { describeKubeError, kubeErrorStatus, kubeErrorStatusBody } from './kube-errors.js';
import type { Labels } from './namespace-labels.js';

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
  const apps = kubeConfig.makeApiClient(AppsV1Api);
  const batch = kubeConfig.makeApiClient(BatchV1Api);
  const { namespace, pageSize } = query;
  const scope = namespace === undefined ? 'all namespaces' : `namespace ${namespace}`;
  const { templates, templateSource } = await readTemplates(core, query);

  const inconsistentLists: string[] = [];
  const listPaged = <T>(what: string, list: (page: Page) => Promise<{ metadata?: Page; items: T[] }>, each: (item: T) => void) =>
    listAllPages(what, list, each, () => inconsistentLists.push(what));
  const pods: PodRecord[] = [];
  // `apps/ReplicaSet`, `batch/Job`: the intermediate owners some Pod has.
  const ownerKinds = new Set<string>();
  await listPaged(`listing Pods in ${scope}`, (page) => {
    const request = { limit: pageSize, ...page, ...(query.labelSelector === undefined ? {} : { labelSelector: query.labelSelector }) };
    return namespace === undefined ? core.listPodForAllNamespaces(request) : core.listNamespacedPod({ ...request, namespace });
  }, (pod) => {
    const record = toPodRecord(pod);
    if (record === undefined) return;
    pods.push(record);
    if (record.owner !== undefined && isIntermediateOwner(record.owner)) ownerKinds.add(record.owner.kind);
  });

  const owners = new Map<string, OwnerRef>();
  const addOwners = (apiVersion: string, kind: string) => (object: { metadata?: V1ObjectMeta }): void => {
    const meta = object.metadata;
    const owner = controllerOf(meta);
    if (meta?.name !== undefined && owner !== undefined) owners.set(ownerKey(meta.namespace ?? '', { apiVersion, kind, name: meta.name }), owner);
  };
  const metadataOnly = setHeaderOptions('Accept', METADATA_LIST);
  // Listed only when some Pod is owned by one.
  const ownerLists: [string, string, (page: Page) => Promise<{ items: { metadata?: V1ObjectMeta }[]; metadata?: Page }>][] = [
    ['apps/v1', 'ReplicaSet', (page) => namespace === undefined
      ? apps.listReplicaSetForAllNamespaces({ limit: pageSize, ...page }, metadataOnly)
      : apps.listNamespacedReplicaSet({ namespace, limit: pageSize, ...page }, metadataOnly)],
    ['batch/v1', 'Job', (page) => namespace === undefined
      ? batch.listJobForAllNamespaces({ limit: pageSize, ...page }, metadataOnly)
      : batch.listNamespacedJob({ namespace, limit: pageSize, ...page }, metadataOnly)],
  ];
  for (const [apiVersion, kind, list] of ownerLists) {
    if (ownerKinds.has(kind)) await listPaged(`listing ${kind}s in ${scope}`, list, addOwners(apiVersion, kind));
  }

  const namespaceLabels = new Map<string, Labels>();
  const addLabels = (object: { metadata?: V1ObjectMeta }): void => {
    if (object.metadata?.name !== undefined) namespaceLabels.set(object.metadata.name, object.metadata.labels ?? {});
  };
  let namespaceLabelsForbidden: FleetSnapshot['namespaceLabelsForbidden'];
  try {
    if (namespace === undefined) await listPaged('listing Namespaces', (page) => core.listNamespace({ limit: pageSize, ...page }, metadataOnly), addLabels);
    else addLabels(await core.readNamespace({ name: namespace }, setHeaderOptions('Accept', METADATA_OBJECT)));
  } catch (error) {
    const cause = error instanceof ClusterError && error.cause !== undefined ? error.cause : error;
    const status = kubeErrorStatus(cause);
    // No such namespace: no Pods either, and nothing to report.
    if (namespace !== undefined && status === 404) return { templates, templateSource, pods, owners, namespaceLabels, inconsistentLists, namespaceLabelsForbidden };
    // Labels are only needed for Pods without a status: one missing permission must not hide the rest.
    if (status !== 403) throw error instanceof ClusterError ? error : new ClusterError(`reading namespace ${namespace ?? ''}: ${describeKubeError(error)}`, { cause: error });
    namespaceLabelsForbidden = { namespace, message: describeKubeError(cause) };
  }
  return { templates, templateSource, pods, owners, namespaceLabels, inconsistentLists, namespaceLabelsForbidden };
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
export async function restartWorkload(kubeConfig: KubeConfig, workload: WorkloadRef, restartedAt: string): Promise<void> {
  const apps = kubeConfig.makeApiClient(AppsV1Api);
  const request = {
    name: workload.name,
    namespace: workload.namespace,
    body: { spec: { template: { metadata: { annotations: { [RESTARTED_AT_ANNOTATION]: restartedAt } } } } },
    fieldManager: 'envoy-injector',
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

type Page = { _continue?: string };

/**
 * Follows `continue` tokens until the list is whole, handing each item to
 * `each` (pages are not kept). A list slower than the API server's history
 * (etcd compacts every 5 minutes) gets 410 Gone for its next page; the Status
 * then carries a token that goes on from where it stopped, without the
 * snapshot: objects changed meanwhile may be missed or seen in their new
 * state, but none twice. Better than starting 50,000 Pods over, which could
 * expire again; `onInconsistent` lets the caller say so.
 */
async function listAllPages<T>(
  what: string,
  list: (page: Page) => Promise<{ metadata?: Page; items: T[] }>,
  each: (item: T) => void,
  onInconsistent: () => void,
): Promise<void> {
  let token: string | undefined;
  do {
    let page: { metadata?: Page; items: T[] };
    try {
      page = await list(token === undefined ? {} : { _continue: token });
    } catch (error) {
      const resume = kubeErrorStatusBody(error)?.metadata?.continue;
      if (token !== undefined && kubeErrorStatus(error) === 410 && typeof resume === 'string' && resume !== '') {
        if (resume === token) throw new ClusterError(`${what}: the API server expired the list and offered the same token again`, { cause: error });
        token = resume;
        onInconsistent();
        continue;
      }
      throw new ClusterError(`${what}: ${describeKubeError(error)}`, { cause: error });
    }
    for (const item of page.items) each(item);
    token = page.metadata?._continue || undefined;
  } while (token !== undefined);
}

/**
 * The few fields the report reads. Pods that finished (Succeeded, Failed) or
 * are being deleted run no sidecar worth reporting, and a rollout in progress
 * would otherwise count its terminating Pods as outdated.
 */
function toPodRecord(pod: V1Pod): PodRecord | undefined {
  const meta = pod.metadata;
  const phase = pod.status?.phase;
  if (meta?.name === undefined || meta.deletionTimestamp !== undefined || phase === 'Succeeded' || phase === 'Failed') return undefined;
  const annotations: Record<string, string> = {};
  for (const [key, value] of Object.entries(meta.annotations ?? {})) {
    // Only what the injector reads: other annotations (last-applied-configuration...) can be large.
    if (key.startsWith('envoy-injector.io/') || key === Annotations.legacyInject) annotations[key] = value;
  }
  return { namespace: meta.namespace ?? '', name: meta.name, owner: controllerOf(meta), annotations, hostNetwork: pod.spec?.hostNetwork === true };
}

function controllerOf(meta: V1ObjectMeta | undefined): OwnerRef | undefined {
  const owner = meta?.ownerReferences?.find((reference) => reference.controller === true);
  return owner === undefined ? undefined : { apiVersion: owner.apiVersion, kind: owner.kind, name: owner.name };
}
