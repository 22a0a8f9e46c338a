import type { CaptureDecision } from './capture.js';
import { Interception } from '../template/index.js';
import { tproxyProxy, tproxyResources } from './interception.js';
import { Annotations, arrayAt, type JsonObject } from '../basics/index.js';
import { proxyProtocolResources, type ProxyProtocolPlan } from './proxy-protocol.js';
import { tcpProbeInjection, type TcpProbePlan } from './tcp-probes.js';

/**
 * The proxy's per-Pod bootstrap (docs/design.md §11): what the template's
 * own bootstrap cannot know, since it depends on the Pod: the tcpSocket
 * probes' listener (tcp-probes.ts), the PROXY protocol's listeners
 * (proxy-protocol.ts) and TPROXY's transparent listener (interception.ts). The patch writes it, as JSON, into the annotation
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
  /** What the status annotation records of it: the ports with the PROXY protocol, when there are any; TPROXY. */
  readonly status: { readonly inboundProxyProtocol?: readonly number[]; readonly interception?: 'tproxy' };
}

export function proxyConfigInjection(capture: CaptureDecision, probes: TcpProbePlan, proxyProtocol: ProxyProtocolPlan): ProxyConfigInjection | undefined {
  if (!capture.capture) return undefined;
  const tcp = capture.settings.tcpProbes === undefined ? undefined : tcpProbeInjection(probes, capture.settings.tcpProbes);
  const { proxyUid, tproxyPort } = capture.settings;
  const tproxy = capture.interception === Interception.tproxy && tproxyPort !== undefined ? tproxyResources(tproxyPort) : undefined;
  if (tcp === undefined && proxyProtocol.ports.length === 0 && tproxy === undefined) return undefined;
  const header = proxyProtocolResources(proxyProtocol.ports);
  const listeners = [...(tcp?.listeners ?? []), ...header.listeners, ...(tproxy?.listeners ?? [])];
  const bootstrap = { static_resources: { listeners, clusters: [...(tcp?.clusters ?? []), ...header.clusters, ...(tproxy?.clusters ?? [])] } };
  const file = `${PROXY_CONFIG_MOUNT_PATH}/${PROXY_CONFIG_FILE}`;
  return {
    operations: tcp?.operations ?? [],
    annotations: { ...tcp?.annotations, [Annotations.proxyConfig]: JSON.stringify(bootstrap) },
    volume: {
      name: PROXY_CONFIG_VOLUME,
      downwardAPI: { items: [{ path: PROXY_CONFIG_FILE, fieldRef: { apiVersion: 'v1', fieldPath: `metadata.annotations['${Annotations.proxyConfig}']` } }] },
    },
    customizeProxy: (container) => {
      const configured = {
        ...container,
        args: [...(arrayAt(container, 'args') ?? []), '--config-path', file],
        volumeMounts: [...(arrayAt(container, 'volumeMounts') ?? []), { name: PROXY_CONFIG_VOLUME, mountPath: PROXY_CONFIG_MOUNT_PATH, readOnly: true }],
      };
      return tproxy === undefined ? configured : tproxyProxy(configured, proxyUid);
    },
    status: {
      ...(proxyProtocol.ports.length === 0 ? {} : { inboundProxyProtocol: proxyProtocol.ports }),
      ...(tproxy === undefined ? {} : { interception: Interception.tproxy }),
    },
  };
}
