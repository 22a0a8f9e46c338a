import { CaptureModeSetting, Interception, type CaptureSettings } from '../template/index.js';
import { everyAddress, tcpProxyFilter } from './envoy-listener.js';
import { Annotations, describeValue, NamespaceLabel, objectAt, own, type JsonObject } from '../basics/index.js';
import { containersRunningAs } from './run-as.js';

/**
 * TPROXY interception (issue 41, docs/design.md §11): inbound connections go
 * by the mangle table's TPROXY target to the proxy's transparent listener,
 * which connects to the app from the client's own address (Envoy's
 * original_src, marked so that the app's replies stay in the Pod): the app
 * sees its real client. The price: the proxy keeps NET_ADMIN at run time.
 */

/** The mark of the proxy's connections to the app: the rules' 0x539 (init/capture-rules.sh). */
export const TPROXY_MARK = 1337;
export const TPROXY_LISTENER = 'inbound_tproxy';
export const TPROXY_CLUSTER = 'inbound_tproxy_passthrough';
export const TPROXY_LOOP_CLUSTER = 'inbound_tproxy_blackhole';

/** What the interception of a captured Pod is decided on. */
export interface InterceptionInput {
  readonly annotations: JsonObject | undefined;
  readonly settings: CaptureSettings;
  /** The Pod is captured in CNI mode. */
  readonly cni: boolean;
  readonly templateName: string;
  readonly namespace: string;
  /** Undefined when unknown (offline without labels): then the namespace allows nothing. */
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
}

/**
 * The interception of a captured Pod: its annotation
 * `envoy-injector.io/capture-interception`, else the template's. TPROXY runs
 * the proxy as root with NET_ADMIN, so a Pod's own ask is honoured only where
 * the platform team allows it (issue 50): the template (`allowTproxy`, or
 * TPROXY as its default) or the namespace's label. TPROXY where it is not
 * allowed or cannot be (CNI mode, a template without a transparent
 * listener's port) is a warning and REDIRECT: never a Pod the API server
 * would refuse, never one left uncaptured.
 */
export function decideInterception(input: InterceptionInput): { interception: Interception; warnings: string[] } {
  const { annotations, settings } = input;
  const given = annotations === undefined ? undefined : own(annotations, Annotations.captureInterception);
  const kinds: readonly string[] = Object.values(Interception);
  const warnings: string[] = [];
  let asked = settings.interception;
  if (given === Interception.redirect || given === Interception.tproxy) asked = given;
  else if (given !== undefined) warnings.push(`${Annotations.captureInterception}: ${describeValue(given)} is not one of ${kinds.join(', ')}; ignored, ${settings.interception} applies`);
  if (asked === Interception.redirect) return { interception: asked, warnings };
  const redirect = (why: string): { interception: Interception; warnings: string[] } => ({
    interception: Interception.redirect,
    warnings: [...warnings, `${Annotations.captureInterception}: tproxy ${why}; captured by REDIRECT instead (the app sees its own Pod as the client)`],
  });
  const label = input.namespaceLabels === undefined ? undefined : own(input.namespaceLabels, NamespaceLabel.allowTproxy);
  if (settings.interception !== Interception.tproxy && !settings.allowTproxy && label !== 'true') {
    const seen = label === undefined ? '' : ` (it is ${describeValue(label)})`;
    const namespace = `the label ${NamespaceLabel.allowTproxy}: "true" of namespace "${input.namespace}"${seen}`;
    return redirect(`is not allowed for this Pod: its proxy would run as root with NET_ADMIN, which neither template "${input.templateName}" (capture.allowTproxy, capture.interception: tproxy) nor ${namespace} allows`);
  }
  if (input.cni) {
    const where = settings.mode === CaptureModeSetting.cni ? 'the template captures in CNI mode' : "CNI mode serves this namespace (its Pod Security forbids the proxy's NET_ADMIN)";
    return redirect(`cannot be done where ${where}: the node plugin installs the REDIRECT rules only`);
  }
  if (settings.tproxyPort === undefined) return redirect('needs a transparent listener, and the template has no capture.tproxyPort');
  return { interception: Interception.tproxy, warnings };
}

/**
 * TPROXY's rules let the proxy's group out too (the proxy runs as root in
 * that group): a warning per container of the Pod's whose effective
 * runAsGroup (its own, else the Pod's) is the proxy's uid, as for its user.
 */
export function proxyGroupClashes(pod: JsonObject, proxyUid: number): string[] {
  return containersRunningAs(pod, 'runAsGroup', proxyUid).map(
    ({ name, where }) => `container ${describeValue(name)} runs as group ${proxyUid} (${where}), the proxy's group under TPROXY: the capture rules let that group's traffic past the proxy; run it as another group`,
  );
}

const ORIGINAL_DST = 'type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst';
const ORIGINAL_SRC = 'type.googleapis.com/envoy.extensions.filters.listener.original_src.v3.OriginalSrc';

/**
 * The per-Pod bootstrap's pieces of TPROXY (Envoy v3): the transparent
 * listener on PORT (IPv4 and IPv6), original_dst marking its local address
 * (TPROXY keeps it: the original destination) restored, original_src making
 * the upstream connection leave from the client's address with the mark; a
 * connection addressed to the listener itself goes to a cluster without
 * endpoints (it would come back forever). Not in the chart's bootstrap: a
 * transparent socket needs NET_ADMIN, which REDIRECT Pods' proxies lack.
 */
export function tproxyResources(port: number): { listeners: JsonObject[]; clusters: JsonObject[] } {
  const listener = {
    name: TPROXY_LISTENER,
    ...everyAddress(port),
    transparent: true,
    traffic_direction: 'INBOUND',
    listener_filters: [
      { name: 'envoy.filters.listener.original_dst', typed_config: { '@type': ORIGINAL_DST } },
      { name: 'envoy.filters.listener.original_src', typed_config: { '@type': ORIGINAL_SRC, mark: TPROXY_MARK } },
    ],
    filter_chains: [
      { filter_chain_match: { destination_port: port }, filters: [tcpProxyFilter(`${TPROXY_LISTENER}_loop`, TPROXY_LOOP_CLUSTER)] },
      { filters: [tcpProxyFilter(TPROXY_LISTENER, TPROXY_CLUSTER)] },
    ],
  };
  const clusters = [
    { name: TPROXY_CLUSTER, type: 'ORIGINAL_DST', lb_policy: 'CLUSTER_PROVIDED', connect_timeout: '10s' },
    { name: TPROXY_LOOP_CLUSTER, type: 'STATIC', connect_timeout: '1s' },
  ];
  return { listeners: [listener], clusters };
}

/**
 * The proxy of a TPROXY Pod: root with exactly NET_ADMIN (transparent
 * sockets, SO_MARK), in the proxy's uid as its group. A capability added to a
 * non-root container is lost at exec (Kubernetes gives no ambient
 * capabilities), so the proxy runs as uid 0; the rules let its traffic out by
 * that group (`--gid-owner`), as they do by uid in REDIRECT mode. Root keeps
 * the runtime's default capabilities unless dropped, so the privileges are
 * ours whatever the template's securityContext says (issue 50): every
 * capability dropped but NET_ADMIN, no privilege escalation, not privileged;
 * the rest of the template's (read-only root, seccomp, SELinux) is kept.
 */
export function tproxyProxy(container: JsonObject, proxyUid: number): JsonObject {
  const context = objectAt(container, 'securityContext') ?? {};
  return {
    ...container,
    securityContext: {
      ...context,
      runAsUser: 0,
      runAsGroup: proxyUid,
      runAsNonRoot: false,
      privileged: false,
      allowPrivilegeEscalation: false,
      capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] },
    },
  };
}
