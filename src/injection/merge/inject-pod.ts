import { Annotations, arrayAt, entryName, InjectedLabel, isJsonObject, jsonPointer, objectAt, own, type JsonObject, type JsonValue } from '../basics/index.js';
import type { SidecarTemplate } from '../template/index.js';
import { padPodResources, type AddedContainers, type ResourceChange } from './pod-resources.js';
import { localVolumeNames, safeToEvictValue } from './proxy-lifecycle.js';
import type { ProxyConfigInjection } from '../traffic/index.js';
import { withTokenMount } from './token-mount.js';

/** RFC 6902 operations; we only ever add. */
export interface PatchOperation {
  readonly op: 'add';
  readonly path: string;
  readonly value: JsonValue;
}

export type MergedList = 'containers' | 'initContainers' | 'volumes' | 'imagePullSecrets';

/** What injection wrote into `envoy-injector.io/status`. */
export interface InjectionStatus {
  readonly template: string;
  readonly hash: string;
  /** The template's hash without CPU and memory: a Pod whose proxy differs from the live template only there is resized in place (issue 52). */
  readonly hashWithoutResources: string;
  readonly containers: readonly string[];
  readonly initContainers: readonly string[];
  readonly volumes: readonly string[];
  readonly imagePullSecrets: readonly string[];
  /** CNI mode only (docs/design.md §11): what the node agent installs the rules for. */
  readonly captureMode?: 'cni';
  /** The proxy's uid when the namespace's OpenShift range gave it (docs/design.md §11); absent with the template's. */
  readonly proxyUid?: number;
  /** The app's ports whose inbound connections get a PROXY protocol header (docs/design.md §11). */
  readonly inboundProxyProtocol?: readonly number[];
  /** TPROXY interception (docs/design.md §11): the app sees its clients' own addresses, the proxy has NET_ADMIN. */
  readonly interception?: 'tproxy';
}

/**
 * The name of every entry the merge adds unless the Pod has one of that
 * name, by where the Pod's own would be: a container name is taken in all
 * three container lists. Which of these names a Pod holds is all the merge
 * reads of the entries of its lists, so the patch memo keys on exactly that
 * (docs/design.md §3): recorded by the one step that adds entries (entryPicker),
 * a feature that adds one cannot leave it out.
 */
export interface AddableNames {
  readonly containers: readonly string[];
  readonly volumes: readonly string[];
  readonly imagePullSecrets: readonly string[];
}

/** A template entry left out because the Pod already had that name. */
export interface KeptEntry {
  readonly list: MergedList;
  readonly name: string;
}

export interface InjectionResult {
  /**
   * The merge's one output: what turns the received Pod into the injected one.
   * Its values share the template's entries (deeply frozen). Never empty: the
   * status annotation is always added.
   */
  readonly patch: readonly PatchOperation[];
  readonly status: InjectionStatus;
  readonly kept: readonly KeptEntry[];
  /** The names of the entries above, added or kept: what the Pod's own entries could change in the patch. */
  readonly addable: AddableNames;
  readonly warnings: readonly string[];
  /** The annotations the patch writes: the status, the autoscaler's when it names volumes, kubectl's default container when the proxy goes first. */
  readonly annotations: readonly string[];
  /** Those annotations with their values, as the patch writes them (annotations-size.ts bounds the Pod's total). */
  readonly writtenAnnotations: Readonly<Record<string, string>>;
  /** The labels the patch writes: InjectedLabel. */
  readonly labels: readonly string[];
  /** When the Pod sets `spec.resources`: each value the patch pads, before and after (pod-resources.ts). */
  readonly podResources?: readonly ResourceChange[];
  /** Why a value of the Pod's `spec.resources` cannot be padded: the Pod must not be injected (admitPod skips it). */
  readonly podResourcesProblem?: string;
}

export interface InjectOptions {
  /** Sidecar containers go to initContainers with `restartPolicy: Always` (Kubernetes 1.29+). */
  readonly nativeSidecar: boolean;
  /** Applied to the proxy (the template's first container) when it is injected; never to the app's own. */
  readonly customizeProxy?: (container: JsonObject) => JsonObject;
  /**
   * Traffic capture: the envoy-init container and its volume. It runs after
   * every other init container with classic sidecars (the Pod's own init
   * containers would find no proxy behind the rules), and first, before the
   * proxy, with native ones. In CNI mode it is the check container, without
   * a volume, and the status says the mode.
   */
  readonly capture?: { readonly initContainer: JsonObject; readonly volume: JsonObject | undefined; readonly cni: boolean } | undefined;
  /** Classic sidecars holding the app: the proxy goes first in `containers`, so the kubelet starts it first. */
  readonly proxyFirst?: boolean;
  /**
   * The ServiceAccount token mount to give every container added, as the API
   * server's ServiceAccount plugin would in its rerun (`token-mount.ts`).
   */
  readonly tokenMount?: JsonObject | undefined;
  /** The proxy's per-Pod bootstrap (proxy-config.ts): the rewritten tcpSocket probes' operations go first, on the Pod as received. */
  readonly proxyConfig?: ProxyConfigInjection | undefined;
  /** The namespace's uid for the proxy (traffic/proxy-ids.ts), recorded in the status; the proxy's container has it already. */
  readonly proxyUid?: number | undefined;
}

/**
 * Merges a template into a Pod by name, like a strategic merge: the Pod's own
 * entries win, absent lists are created, nothing of the Pod's is removed or
 * reordered. The patch is built from what was added, so its cost is linear in
 * the Pod's size: a generic diff of two large Pods would not be. Whoever needs
 * the injected Pod applies the patch (`applyPodPatch`), as the API server does.
 */
export function injectPod(pod: JsonObject, template: SidecarTemplate, options: InjectOptions): InjectionResult {
  const spec = objectAt(pod, 'spec') ?? {};
  const kept: KeptEntry[] = [];
  const addable: { [List in keyof AddableNames]: string[] } = { containers: [], volumes: [], imagePullSecrets: [] };

  // Kubernetes wants container names unique across all container lists.
  const takenContainerNames = new Set<string>();
  for (const list of ['containers', 'initContainers', 'ephemeralContainers']) {
    for (const entry of arrayAt(spec, list) ?? []) {
      const name = entryName(entry);
      if (name !== undefined) takenContainerNames.add(name);
    }
  }
  const pickNew = entryPicker(kept, addable);
  const namesIn = (list: string): Set<string> =>
    new Set((arrayAt(spec, list) ?? []).map(entryName).filter((name) => name !== undefined));

  const proxyName = entryName(template.containers[0]);
  const customize = options.customizeProxy ?? ((container: JsonObject) => container);
  const sidecars = pickNew('containers', template.containers, takenContainerNames).map((container) =>
    entryName(container) === proxyName ? customize(container) : container,
  );
  const templateInits = pickNew('initContainers', template.initContainers, takenContainerNames);
  const captureInits = options.capture === undefined ? [] : pickNew('initContainers', [options.capture.initContainer], takenContainerNames);
  const addedVolumes = [...template.volumes, ...(options.capture?.volume === undefined ? [] : [options.capture.volume]), ...(options.proxyConfig === undefined ? [] : [options.proxyConfig.volume])];
  const volumes = pickNew('volumes', addedVolumes, namesIn('volumes'));
  const pullSecrets = pickNew('imagePullSecrets', template.imagePullSecrets, namesIn('imagePullSecrets'));

  const nativeSidecars = options.nativeSidecar ? sidecars.map((container) => ({ ...container, restartPolicy: 'Always' })) : [];
  const { tokenMount } = options;
  const mounted = (containers: JsonObject[]): JsonObject[] => (tokenMount === undefined ? containers : containers.map((container) => withTokenMount(container, tokenMount)));
  const classicSidecars = mounted(options.nativeSidecar ? [] : sidecars);
  const firstInits = mounted(options.nativeSidecar ? [...captureInits, ...nativeSidecars] : []);
  const lastInits = mounted(options.nativeSidecar ? templateInits : [...templateInits, ...captureInits]);
  const proxyFirst = options.proxyFirst === true && entryName(classicSidecars[0]) === proxyName ? classicSidecars.slice(0, 1) : [];

  // The lists the Pod lacks, created whole; for a Pod without `spec`, they are its new spec.
  const createdLists: JsonObject = {};
  // Probe rewrites name indices of the Pod as received: before anything is inserted.
  const specPatch: PatchOperation[] = [...(options.proxyConfig?.operations ?? [])];
  addToList(spec, createdLists, 'containers', proxyFirst, classicSidecars.slice(proxyFirst.length), specPatch);
  // Native sidecars first, so the proxy is up before the app's own init containers run.
  addToList(spec, createdLists, 'initContainers', firstInits, lastInits, specPatch);
  addToList(spec, createdLists, 'volumes', [], volumes, specPatch);
  addToList(spec, createdLists, 'imagePullSecrets', [], pullSecrets, specPatch);
  // A Pod without `spec` is invalid, but admission runs before validation: add it whole.
  const patch: PatchOperation[] =
    specPatch.length === 0 || isJsonObject(pod['spec']) ? specPatch : [{ op: 'add', path: jsonPointer('spec'), value: createdLists }];

  const resources = padResources(pod, { containers: classicSidecars, firstInits, lastInits }, patch);

  const status: InjectionStatus = {
    template: template.name,
    hash: template.hash,
    hashWithoutResources: template.hashWithoutResources,
    containers: classicSidecars.map(nameOf),
    initContainers: [...firstInits, ...lastInits].map(nameOf),
    volumes: volumes.map(nameOf),
    imagePullSecrets: pullSecrets.map(nameOf),
    ...(options.capture?.cni === true ? { captureMode: 'cni' } : {}),
    ...(options.proxyUid === undefined ? {} : { proxyUid: options.proxyUid }),
    ...options.proxyConfig?.status,
  };
  const annotations = { ...patchAnnotations(pod, status, template.safeToEvictLocalVolumes ? volumes : [], proxyFirst.length > 0), ...options.proxyConfig?.annotations };
  const labels: Record<string, string> = { [InjectedLabel.key]: InjectedLabel.value };
  addMetadataEntries(objectAt(pod, 'metadata'), { annotations, labels }, patch);

  const warnings = kept.map(
    ({ list, name }) => `${list} "${name}" from template "${template.name}" is already in the Pod; kept the Pod's own`,
  );
  return { patch, status, kept, addable, warnings, annotations: Object.keys(annotations), writtenAnnotations: annotations, labels: Object.keys(labels), ...resources };
}

/**
 * Picks each entry whose name TAKEN lacks, taking it; records the others in
 * KEPT, and every name looked at in ADDABLE. Every entry the patch adds goes
 * through here: the one place a name the Pod could hold is looked up.
 */
function entryPicker(kept: KeptEntry[], addable: { [List in keyof AddableNames]: string[] }): (list: MergedList, entries: readonly JsonObject[], taken: Set<string>) => JsonObject[] {
  return (list, entries, taken) => {
    const picked: JsonObject[] = [];
    const names = addable[list === 'initContainers' ? 'containers' : list];
    for (const entry of entries) {
      const name = entryName(entry) ?? '';
      names.push(name);
      if (taken.has(name)) kept.push({ list, name });
      else {
        taken.add(name);
        // Template entries are deeply frozen: shared, never copied, never changed.
        picked.push(entry);
      }
    }
    return picked;
  };
}

/** Pod-level resources padded by what the added containers bring to the API server's aggregate: the operations into PATCH, what InjectionResult says. */
function padResources(pod: JsonObject, added: AddedContainers, patch: PatchOperation[]): Pick<InjectionResult, 'podResources' | 'podResourcesProblem'> {
  const padding = padPodResources(pod, added);
  if (padding === undefined) return {};
  if (!padding.ok) return { podResourcesProblem: padding.problem };
  for (const { path, value } of padding.patch) patch.push({ op: 'add', path, value });
  return { podResources: padding.changes };
}

/**
 * Records the operations that put `prepend` at the front and `append` at the
 * end of `spec[key]`; a list `spec` lacks is created whole in `created`.
 */
function addToList(
  spec: JsonObject,
  created: JsonObject,
  key: string,
  prepend: readonly JsonObject[],
  append: readonly JsonObject[],
  patch: PatchOperation[],
): void {
  if (prepend.length === 0 && append.length === 0) return;
  if (arrayAt(spec, key) === undefined) {
    // Absent (or null): add the whole list; `add .../-` on a missing list fails.
    const list = [...prepend, ...append];
    created[key] = list;
    patch.push({ op: 'add', path: jsonPointer('spec', key), value: list });
    return;
  }
  prepend.forEach((entry, index) => patch.push({ op: 'add', path: jsonPointer('spec', key, index), value: entry }));
  for (const entry of append) patch.push({ op: 'add', path: jsonPointer('spec', key, '-'), value: entry });
}

/**
 * Adds annotations and labels without replacing either map (which would wipe
 * the others); `add` of a key a map has replaces its value. A Pod without
 * metadata gets both maps in one operation.
 */
function addMetadataEntries(
  metadata: JsonObject | undefined,
  maps: { readonly annotations: Readonly<Record<string, string>>; readonly labels: Readonly<Record<string, string>> },
  patch: PatchOperation[],
): void {
  if (metadata === undefined) {
    patch.push({ op: 'add', path: jsonPointer('metadata'), value: { annotations: { ...maps.annotations }, labels: { ...maps.labels } } });
    return;
  }
  for (const field of ['annotations', 'labels'] as const) {
    const entries = maps[field];
    if (objectAt(metadata, field) === undefined) patch.push({ op: 'add', path: jsonPointer('metadata', field), value: { ...entries } });
    else for (const [key, value] of Object.entries(entries)) patch.push({ op: 'add', path: jsonPointer('metadata', field, key), value });
  }
}

/** The annotations the patch writes: the status, the autoscaler's for LOCAL volumes added, kubectl's default container when the proxy goes FIRST. */
function patchAnnotations(pod: JsonObject, status: InjectionStatus, local: readonly JsonObject[], first: boolean): Record<string, string> {
  const annotations: Record<string, string> = { [Annotations.status]: JSON.stringify(status) };
  const safeToEvict = local.length === 0 ? undefined : safeToEvictValue(pod, localVolumeNames(local));
  if (safeToEvict !== undefined) annotations[Annotations.safeToEvictLocalVolumes] = safeToEvict;
  const defaultContainer = first ? defaultContainerValue(pod) : undefined;
  if (defaultContainer !== undefined) annotations[Annotations.defaultContainer] = defaultContainer;
  return annotations;
}

/**
 * With the proxy first in `containers`, `kubectl logs/exec` would reach it
 * rather than the app: the Pod's first own container becomes the default
 * (as Istio does), unless the Pod names one itself.
 */
function defaultContainerValue(pod: JsonObject): string | undefined {
  const metadata = objectAt(pod, 'metadata');
  if (own(objectAt(metadata, 'annotations') ?? {}, Annotations.defaultContainer) !== undefined) return undefined;
  return entryName(arrayAt(objectAt(pod, 'spec'), 'containers')?.[0]);
}

function nameOf(entry: JsonObject): string {
  return entryName(entry) ?? '';
}
