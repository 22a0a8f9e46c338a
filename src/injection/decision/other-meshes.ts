import { arrayAt, entryName, objectAt, own, type JsonObject } from '../basics/index.js';

/**
 * What another mesh's injector leaves in a Pod it injected (docs/design.md
 * §4 rule 7a): its proxy and its init containers (which set up rules of
 * their own for the Pod's traffic), and the status it writes. Only marks of
 * an injection: a mesh's opt-in or opt-out (`sidecar.istio.io/inject`,
 * `linkerd.io/inject`, ...) says nothing was added yet, and is not here.
 * One place, data only: the webhook's rule and policy mode's match
 * condition (policy/compile-match-conditions.ts) both read it.
 */
export interface OtherMesh {
  readonly mesh: string;
  /** Annotations only its injector writes, whatever their value. */
  readonly annotations: readonly string[];
  /** Labels only its injector writes, whatever their value. */
  readonly labels: readonly string[];
  /** The containers it adds, looked for in `containers` and `initContainers` alike (a native sidecar is an init container). */
  readonly containers: readonly string[];
}

export const OTHER_MESHES: readonly OtherMesh[] = [
  // istio/istio pkg/kube/inject: the status annotation; istio-init, or with its CNI istio-validation; the proxy, native or not.
  { mesh: 'Istio', annotations: ['sidecar.istio.io/status'], labels: [], containers: ['istio-proxy', 'istio-init', 'istio-validation'] },
  // linkerd/linkerd2 pkg/k8s: ProxyVersionAnnotation, ControllerNSLabel; proxy-init, or with its CNI the network validator.
  { mesh: 'Linkerd', annotations: ['linkerd.io/proxy-version'], labels: ['linkerd.io/control-plane-ns'], containers: ['linkerd-proxy', 'linkerd-init', 'linkerd-network-validator'] },
  // kumahq/kuma pkg/plugins/runtime/k8s/metadata: KumaSidecarInjectedAnnotation; kuma-init, or with its CNI kuma-validation.
  { mesh: 'Kuma', annotations: ['kuma.io/sidecar-injected'], labels: [], containers: ['kuma-sidecar', 'kuma-init', 'kuma-validation'] },
  // hashicorp/consul-k8s connect-inject: KeyInjectStatus (every version writes it); consul-dataplane (1.0+). Not envoy-sidecar, its
  // proxy before 1.0: a name common enough among Pods' own Envoys to be no mark (the status annotation is there anyway).
  { mesh: 'Consul', annotations: ['consul.hashicorp.com/connect-inject-status'], labels: [], containers: ['consul-dataplane', 'consul-connect-inject-init'] },
];

/** A mesh found in a Pod, and each of its marks there (`annotation sidecar.istio.io/status`, `container istio-proxy`, ...). */
export interface OtherMeshFound {
  readonly mesh: string;
  readonly marks: readonly string[];
}

/** The first mesh of OTHER_MESHES whose marks the Pod holds; undefined when none. */
export function otherMeshIn(pod: JsonObject): OtherMeshFound | undefined {
  const metadata = objectAt(pod, 'metadata');
  const annotations = objectAt(metadata, 'annotations') ?? {};
  const labels = objectAt(metadata, 'labels') ?? {};
  const spec = objectAt(pod, 'spec');
  const names = (list: string): Set<string> => new Set((arrayAt(spec, list) ?? []).map(entryName).filter((name) => name !== undefined));
  const containers = names('containers');
  const initContainers = names('initContainers');
  for (const { mesh, annotations: keys, labels: labelKeys, containers: added } of OTHER_MESHES) {
    const marks = [
      ...keys.filter((key) => own(annotations, key) !== undefined).map((key) => `annotation ${key}`),
      ...labelKeys.filter((key) => own(labels, key) !== undefined).map((key) => `label ${key}`),
      ...added.filter((name) => containers.has(name)).map((name) => `container ${name}`),
      ...added.filter((name) => initContainers.has(name)).map((name) => `init container ${name}`),
    ];
    if (marks.length > 0) return { mesh, marks };
  }
  return undefined;
}
