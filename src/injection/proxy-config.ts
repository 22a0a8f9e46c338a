import type { CaptureDecision } from './capture.js';
import { arrayAt, type JsonObject } from './json.js';
import { Annotations } from './names.js';
import { proxyProtocolResources, type ProxyProtocolPlan } from './proxy-protocol.js';
import { tcpProbeInjection, type TcpProbePlan } from './tcp-probes.js';

/**
 * The proxy's per-Pod bootstrap (docs/design.md §11): what the template's
 * own bootstrap cannot know, since it depends on the Pod: the tcpSocket
 * probes' listener (tcp-probes.ts) and the PROXY protocol's listeners
 * (proxy-protocol.ts). The patch writes it, as JSON, into the annotation
 * `envoy-injector.io/proxy-config`; a downwardAPI volume gives it to the
 * proxy as a file, and `--config-path` names it. Envoy merges its
 * `--config-yaml` over it (protobuf MergeFrom: listeners and clusters
 * concatenated).
 */

/** The volume, where it is mounted, and the file's name. */
export const PROXY_CONFIG_VOLUME = 'envoy-proxy-config';
export const PROXY_CONFIG_MOUNT_PATH = '/etc/envoy-injector/proxy-config';
export const PROXY_CONFIG_FILE = 'bootstrap.json';

/** What the patch adds: operations first (tcp-probes.ts), annotations, the volume, the proxy's mount and flag, and the status's record. */
export interface ProxyConfigInjection {
  readonly operations: readonly { readonly op: 'add'; readonly path: string; readonly value: JsonObject }[];
  readonly annotations: Readonly<Record<string, string>>;
  readonly volume: JsonObject;
  readonly customizeProxy: (container: JsonObject) => JsonObject;
  /** What the status annotation records of it: the ports with the PROXY protocol, when there are any. */
  readonly status: { readonly inboundProxyProtocol?: readonly number[] };
}

export function proxyConfigInjection(capture: CaptureDecision, probes: TcpProbePlan, proxyProtocol: ProxyProtocolPlan): ProxyConfigInjection | undefined {
  if (!capture.capture) return undefined;
  const tcp = capture.settings.tcpProbes === undefined ? undefined : tcpProbeInjection(probes, capture.settings.tcpProbes);
  if (tcp === undefined && proxyProtocol.ports.length === 0) return undefined;
  const header = proxyProtocolResources(proxyProtocol.ports);
  const bootstrap = { static_resources: { listeners: [...(tcp?.listeners ?? []), ...header.listeners], clusters: [...(tcp?.clusters ?? []), ...header.clusters] } };
  const file = `${PROXY_CONFIG_MOUNT_PATH}/${PROXY_CONFIG_FILE}`;
  return {
    operations: tcp?.operations ?? [],
    annotations: { ...tcp?.annotations, [Annotations.proxyConfig]: JSON.stringify(bootstrap) },
    volume: {
      name: PROXY_CONFIG_VOLUME,
      downwardAPI: { items: [{ path: PROXY_CONFIG_FILE, fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${Annotations.proxyConfig}']` } }] },
    },
    customizeProxy: (container) => ({
      ...container,
      args: [...(arrayAt(container, 'args') ?? []), '--config-path', file],
      volumeMounts: [...(arrayAt(container, 'volumeMounts') ?? []), { name: PROXY_CONFIG_VOLUME, mountPath: PROXY_CONFIG_MOUNT_PATH, readOnly: true }],
    }),
    status: proxyProtocol.ports.length === 0 ? {} : { inboundProxyProtocol: proxyProtocol.ports },
  };
}
