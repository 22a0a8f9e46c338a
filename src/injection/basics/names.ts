/** The annotation and label keys of the decision and the merge (docs/design.md §4-§5), in one place. */
export const Annotations = {
  inject: 'envoy-injector.io/inject',
  template: 'envoy-injector.io/template',
  status: 'envoy-injector.io/status',
  nativeSidecar: 'envoy-injector.io/native-sidecar',
  /** Traffic capture (docs/design.md §11): `"true"`/`"false"`, and the exclusions, comma-separated. */
  capture: 'envoy-injector.io/capture',
  captureExcludeOutboundCidrs: 'envoy-injector.io/capture-exclude-outbound-cidrs',
  captureExcludeOutboundPorts: 'envoy-injector.io/capture-exclude-outbound-ports',
  captureExcludeInboundPorts: 'envoy-injector.io/capture-exclude-inbound-ports',
  captureIncludeInboundPorts: 'envoy-injector.io/capture-include-inbound-ports',
  /** How inbound connections reach the proxy (docs/design.md §11): `"redirect"` or `"tproxy"` (the app sees its clients' own addresses). */
  captureInterception: 'envoy-injector.io/capture-interception',
  /** tcpSocket probes under capture (docs/design.md §11): the Pod's `"false"` leaves them as written. */
  rewriteTcpProbes: 'envoy-injector.io/rewrite-tcp-probes',
  /** Written by the patch: each tcpSocket probe rewritten, as JSON `[{container, probe, port}]`. */
  tcpProbes: 'envoy-injector.io/tcp-probes',
  /** Written by the patch: the proxy's per-Pod bootstrap (JSON: the tcpSocket probes' listener, the PROXY protocol's), which a downwardAPI volume gives it as a file. */
  proxyConfig: 'envoy-injector.io/proxy-config',
  /** The app's ports whose inbound connections reach it with a PROXY protocol header (docs/design.md §11), comma-separated. */
  inboundProxyProtocol: 'envoy-injector.io/inbound-proxy-protocol',
  /** The proxy's part in the Pod's life (docs/design.md §13): `"false"` starts the app without waiting for the proxy. */
  holdApplication: 'envoy-injector.io/hold-application',
  /** cluster-autoscaler (1.27+): the local volumes it may lose when it evicts the Pod, comma-separated. */
  safeToEvictLocalVolumes: 'cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes',
  /** kubectl (1.20+): the container `kubectl logs/exec` pick when none is named; set to the app's when the proxy goes first. */
  defaultContainer: 'kubectl.kubernetes.io/default-container',
  /** The seed's Initializer annotation; `"true"` still means inject. */
  legacyInject: 'initializer.kubernetes.io/envoy',
} as const;

/**
 * The label every injected Pod gets, beside the status annotation. Labels are
 * what an objectSelector reads: the chart's webhooks and the policy skip Pods
 * that carry it, so the API server's rerun after our patch (the reinvocation
 * pass) neither converts the Pod for our matchConditions nor calls us again.
 */
export const InjectedLabel = { key: 'envoy-injector.io/injected', value: 'true' } as const;

export const NamespaceLabel = {
  key: 'envoy-injector.io/inject',
  enabled: 'enabled',
  disabled: 'disabled',
  /** The template of the namespace's Pods (a Pod's own annotation of the same key wins). */
  template: 'envoy-injector.io/template',
  /**
   * `"true"`: the namespace's Pods may ask for TPROXY (docs/design.md §11), whose
   * proxy runs as root with NET_ADMIN. A label, as Pod Security's: set by whoever
   * may change the Namespace object, not by its tenants.
   */
  allowTproxy: 'envoy-injector.io/allow-tproxy',
} as const;

/** The namespace annotations the injector reads (the proxy defaults): all under this prefix, the only ones the watch keeps. */
export const NAMESPACE_ANNOTATION_PREFIX = 'envoy-injector.io/';

/**
 * OpenShift's id ranges of a namespace (its namespace controller writes them;
 * its SCCs enforce them): the proxy's uid and group come from them (§11). The
 * two namespace annotations the injector reads beyond its own prefix.
 */
export const OpenShiftAnnotation = {
  uidRange: 'openshift.io/sa.scc.uid-range',
  supplementalGroups: 'openshift.io/sa.scc.supplemental-groups',
} as const;
export const OPENSHIFT_ID_ANNOTATIONS: readonly string[] = Object.values(OpenShiftAnnotation);

/** Pod Security admission's label: `baseline` and `restricted` forbid the capture's NET_ADMIN. */
export const PodSecurityLabel = {
  enforce: 'pod-security.kubernetes.io/enforce',
  forbiddingCapture: ['baseline', 'restricted'],
} as const;

/** The ConfigMap key of the default template (the seed's key). */
export const DEFAULT_TEMPLATE_NAME = 'config';

/** Namespaces never injected, whatever their labels say. */
export const ALWAYS_EXCLUDED_NAMESPACES: readonly string[] = ['kube-system', 'kube-public', 'kube-node-lease'];
