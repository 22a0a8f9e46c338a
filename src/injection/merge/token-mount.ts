import { arrayAt, entryName, isJsonObject, objectAt, own, type JsonObject, type JsonValue } from '../basics/index.js';

/**
 * The ServiceAccount token mount, as kube-apiserver's ServiceAccount
 * admission plugin adds it (plugin/pkg/admission/serviceaccount, 1.22+:
 * `mountServiceAccountToken`). The plugin runs before the webhooks, and once
 * more when a webhook changed the Pod (the API server reruns its whole
 * mutating chain, `admission/reinvocation.go`); in that rerun it adds this
 * mount to every container and init container that has no mount at the
 * path, so to the containers our patch added. That change makes the API
 * server call a webhook of `reinvocationPolicy: IfNeeded` again
 * (`webhook/mutating/dispatcher.go`: the object changed since the last
 * webhook call), for an answer that changes nothing. Adding the very mount
 * ourselves leaves the rerun nothing to add: one call per injected Pod, and
 * the stored Pod is the same as before.
 */
export const SERVICE_ACCOUNT_TOKEN_PATH = '/var/run/secrets/kubernetes.io/serviceaccount';
/** The plugin uses the first volume whose name has this prefix (`ServiceAccountVolumeName + "-"`). */
export const SERVICE_ACCOUNT_VOLUME_PREFIX = 'kube-api-access-';
/** The plugin leaves mirror Pods (the kubelet's static Pods) alone. */
const MIRROR_POD_ANNOTATION = 'kubernetes.io/config.mirror';

/**
 * The volume the plugin would mount into the containers we add, when it is
 * sure to: the Pod is no mirror Pod, does not set
 * `automountServiceAccountToken: false`, has a `kube-api-access-*` volume (the
 * first is the one), and the plugin's first pass left its mark (every
 * container and init container mounts something at the path, one of them
 * that volume; a ServiceAccount with automount off leaves no such mark).
 * Otherwise undefined: we add nothing, and at worst the API server calls us
 * once more.
 */
export function serviceAccountTokenVolume(pod: JsonObject): string | undefined {
  const annotations = objectAt(objectAt(pod, 'metadata'), 'annotations');
  if (annotations !== undefined && own(annotations, MIRROR_POD_ANNOTATION) !== undefined) return undefined;
  const spec = objectAt(pod, 'spec');
  if (spec === undefined || spec['automountServiceAccountToken'] === false) return undefined;
  const volume = firstTokenVolume(arrayAt(spec, 'volumes'));
  if (volume === undefined) return undefined;
  // Per review: loops, no copies of the lists.
  let mountsVolume = false;
  for (const list of ['containers', 'initContainers']) {
    for (const container of arrayAt(spec, list) ?? []) {
      const mount = tokenPathMount(container);
      if (mount === undefined) return undefined;
      if (own(mount, 'name') === volume) mountsVolume = true;
    }
  }
  return mountsVolume ? volume : undefined;
}

function firstTokenVolume(volumes: readonly JsonValue[] | undefined): string | undefined {
  for (const entry of volumes ?? []) {
    const name = entryName(entry);
    if (name?.startsWith(SERVICE_ACCOUNT_VOLUME_PREFIX) === true) return name;
  }
  return undefined;
}

/** The mount the plugin adds, of VOLUMENAME. */
export function serviceAccountTokenMount(volumeName: string): JsonObject {
  return { name: volumeName, readOnly: true, mountPath: SERVICE_ACCOUNT_TOKEN_PATH };
}

/**
 * The mount with its volume's name left open: what the webhook's patch memo
 * keeps (the name has a random suffix per Pod, the rest of the patch is the
 * same for every Pod of a shape). The encoder (`admission/responses.ts`)
 * leaves a gap where its name goes, filled per request. Its `name` here is
 * only a label for whoever prints the patch.
 */
export const TOKEN_MOUNT_PLACEHOLDER: JsonObject = Object.freeze(serviceAccountTokenMount(`${SERVICE_ACCOUNT_VOLUME_PREFIX}<per Pod>`));

/** CONTAINER with MOUNT appended to its volumeMounts, as the plugin does, unless it already mounts something at the path. */
export function withTokenMount(container: JsonObject, mount: JsonObject): JsonObject {
  if (tokenPathMount(container) !== undefined) return container;
  const mounts = arrayAt(container, 'volumeMounts') ?? [];
  return { ...container, volumeMounts: [...mounts, mount] };
}

function tokenPathMount(container: unknown): JsonObject | undefined {
  if (!isJsonObject(container)) return undefined;
  return arrayAt(container, 'volumeMounts')?.find((mount): mount is JsonObject => isJsonObject(mount) && own(mount, 'mountPath') === SERVICE_ACCOUNT_TOKEN_PATH);
}
