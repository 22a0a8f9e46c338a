import { captureArgs } from './capture.js';
import { CAPTURE_CHECK_NAME, type CaptureExclusions, type CaptureSettings } from '../template/index.js';
import type { NamespaceProxyIds } from './proxy-ids.js';
import type { JsonObject } from '../basics/index.js';

/** The injector image's own user: the check runs as it, unless that is the proxy's uid (the rules let the proxy's traffic through). */
const CHECK_UID = 65532;

/** The Node.js binary and the CLI in the injector's image (Dockerfile: distroless nodejs, WORKDIR /app). */
export const CHECK_COMMAND = ['/nodejs/bin/node', '/app/bin/envoy-injector.js', 'check-capture'] as const;

/** The check's exit codes (`envoy-injector check-capture`): the agent's repair reads `notRedirected` from the Pod's status. */
export const CheckCaptureExit = {
  redirected: 0,
  /** sysexits' EX_UNAVAILABLE: the node did not install the rules. */
  notRedirected: 69,
  usage: 2,
} as const;

/** The user the check runs as: never the proxy's, whose connections the rules let out unredirected. */
export function checkUid(proxyUid: number): number {
  return proxyUid === CHECK_UID ? CHECK_UID + 1 : CHECK_UID;
}

/**
 * CNI mode's init container (docs/design.md §11, CNI mode): no privileges,
 * a securityContext Pod Security `restricted` accepts; it runs the
 * injector's `check-capture` with the rule script's arguments, which the
 * node agent reads back from it: what is checked is what was installed.
 */
export function captureCheckContainer(settings: CaptureSettings, exclusions: CaptureExclusions, ids?: NamespaceProxyIds): JsonObject {
  // In a namespace with an OpenShift range, ids of that range (its SCC refuses others): the one below the proxy's, and the proxy's group.
  const uid = ids?.checkUid ?? checkUid(settings.proxyUid);
  const gid = ids?.gid ?? uid;
  return {
    name: CAPTURE_CHECK_NAME,
    image: settings.checkImage ?? settings.image,
    ...(settings.imagePullPolicy === undefined ? {} : { imagePullPolicy: settings.imagePullPolicy }),
    // The image's ENTRYPOINT runs `serve`: the command names the bundle's entry as the chart's preStop does.
    command: [...CHECK_COMMAND],
    args: captureArgs(settings, exclusions),
    resources: settings.resources,
    securityContext: {
      runAsNonRoot: true,
      runAsUser: uid,
      runAsGroup: gid,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
  };
}
