import {
  CAPTURE_EXCLUSION_KINDS,
  CAPTURE_INIT_NAME,
  CAPTURE_LOCK_VOLUME,
  captureListProblem,
  CaptureModeSetting,
  Interception,
  type CaptureExclusionName,
  type CaptureExclusions,
  type CaptureSettings,
  type SidecarTemplate,
} from '../template/index.js';
import { Annotations, describeValue, objectAt, OpenShiftAnnotation, own, PodSecurityLabel, type JsonObject } from '../basics/index.js';
import { decideInterception, proxyGroupClashes } from './interception.js';
import { namespaceProxyIds, type NamespaceProxyIds } from './proxy-ids.js';
import { containersRunningAs } from './run-as.js';

/** Why a Pod's traffic is or is not captured: a fixed set, as the decision's reasons. */
export const CaptureReason = {
  annotationTrue: 'annotation_true',
  templateDefault: 'template_default',
  annotationFalse: 'annotation_false',
  notEnabled: 'not_enabled',
  noCaptureSettings: 'no_capture_settings',
  hostNetwork: 'host_network',
  podSecurity: 'pod_security',
} as const;
export type CaptureReason = (typeof CaptureReason)[keyof typeof CaptureReason];

/** How a captured Pod gets its rules: envoy-init in the Pod, or the node's CNI plugin (docs/design.md §11, CNI mode). */
export const CaptureMode = { initContainer: 'initContainer', cni: 'cni' } as const;
export type CaptureMode = (typeof CaptureMode)[keyof typeof CaptureMode];

export type CaptureDecision =
  | {
      readonly capture: true;
      readonly mode: CaptureMode;
      readonly reason: CaptureReason;
      readonly message: string;
      readonly settings: CaptureSettings;
      /** After the Pod's annotations: what the rules get. */
      readonly exclusions: CaptureExclusions;
      /** REDIRECT, or TPROXY (the app sees its clients' own addresses; the proxy keeps NET_ADMIN). */
      readonly interception: Interception;
      /** The namespace's OpenShift ids, when it has a usable range: `settings.proxyUid` is their uid then. */
      readonly proxyIds: NamespaceProxyIds | undefined;
      readonly warnings: readonly string[];
    }
  | { readonly capture: false; readonly reason: CaptureReason; readonly message: string; readonly warnings: readonly string[] };

/** Each exclusion's annotation. */
export const CAPTURE_EXCLUSION_ANNOTATIONS: Readonly<Record<CaptureExclusionName, string>> = {
  excludeOutboundCidrs: Annotations.captureExcludeOutboundCidrs,
  excludeOutboundPorts: Annotations.captureExcludeOutboundPorts,
  excludeInboundPorts: Annotations.captureExcludeInboundPorts,
  includeInboundPorts: Annotations.captureIncludeInboundPorts,
};

export interface CaptureInput {
  readonly pod: JsonObject;
  readonly template: SidecarTemplate;
  readonly namespace: string;
  /** Undefined when unknown (offline without labels): no Pod Security level is assumed. */
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
  /** The namespace's annotations the injector keeps: OpenShift's uid range gives the proxy's uid (proxy-ids.ts). */
  readonly namespaceAnnotations?: Readonly<Record<string, string>> | undefined;
}

/**
 * Decides whether an injected Pod's traffic is captured (docs/design.md §11):
 * the Pod's annotation, else the template's default; never for hostNetwork
 * Pods (the rules would land in the node's network), nor when the Pod keeps
 * its own container of the proxy's name, nor, in initContainer mode, where
 * Pod Security forbids NET_ADMIN (the API server would refuse the Pod after
 * our patch); `auto` turns to CNI mode there and where the namespace has
 * an OpenShift uid range (whose SCC refuses envoy-init), `cni` always is.
 * With a usable range the proxy's uid is the namespace's (proxy-ids.ts).
 * A bad annotation is ignored with a warning; nothing here refuses a Pod.
 */
export function decideCapture(input: CaptureInput): CaptureDecision {
  const annotations = objectAt(objectAt(input.pod, 'metadata'), 'annotations');
  const warnings: string[] = [];
  const off = (reason: CaptureReason, message: string, warning?: string): CaptureDecision => {
    if (warning !== undefined) warnings.push(warning);
    return { capture: false, reason, message, warnings };
  };
  const raw = annotations === undefined ? undefined : own(annotations, Annotations.capture);
  let asked: boolean | undefined;
  if (raw === 'true' || raw === 'false') asked = raw === 'true';
  else if (raw !== undefined) warnings.push(`${Annotations.capture}: ${describeValue(raw)} is not "true" or "false"; ignored`);

  const template = input.template.capture;
  if (template === undefined) return noSettings(input.template, asked, off);
  if (asked === false) return off(CaptureReason.annotationFalse, `the Pod is annotated ${Annotations.capture}: "false"`);
  if (asked === undefined && !template.enabled) {
    return off(CaptureReason.notEnabled, `capture is off by default (template "${input.template.name}") and the Pod is not annotated ${Annotations.capture}: "true"`);
  }
  if (own(objectAt(input.pod, 'spec') ?? {}, 'hostNetwork') === true) {
    const message = 'the Pod uses hostNetwork: its traffic is never captured (the rules would change the node\'s network)';
    return off(CaptureReason.hostNetwork, message, `${Annotations.capture}: ${message}`);
  }
  const labels = input.namespaceLabels ?? {};
  const level = Object.hasOwn(labels, PodSecurityLabel.enforce) ? labels[PodSecurityLabel.enforce] : undefined;
  const forbidden = level !== undefined && PodSecurityLabel.forbiddingCapture.some((forbidding) => forbidding === level);
  const forbids = `namespace "${input.namespace}" enforces Pod Security "${level ?? ''}" (${PodSecurityLabel.enforce}), which forbids the NET_ADMIN capability`;
  if (forbidden && template.mode === CaptureModeSetting.initContainer) {
    const message = `${forbids} traffic capture needs`;
    return off(CaptureReason.podSecurity, message, `${message}: the Pod was injected without traffic capture`);
  }
  // Its warnings are the merge's (admit-pod.ts), said once whether or not the Pod is captured.
  const { ids, openshift } = namespaceProxyIds(input.namespace, input.namespaceAnnotations);
  const settings = ids === undefined ? template : { ...template, proxyUid: ids.uid };

  warnings.push(...proxyUidClashes(input.pod, settings.proxyUid));
  const exclusions = resolveExclusions(annotations, settings.defaults, warnings);
  const reason = asked === true ? CaptureReason.annotationTrue : CaptureReason.templateDefault;
  const why = asked === true ? `the Pod is annotated ${Annotations.capture}: "true"` : `capture is on by default (template "${input.template.name}")`;
  const toCni = settings.mode === CaptureModeSetting.auto && (forbidden || openshift);
  const mode = settings.mode === CaptureModeSetting.cni || toCni ? CaptureMode.cni : CaptureMode.initContainer;
  const onOpenShift = `namespace "${input.namespace}" has an OpenShift uid range (${OpenShiftAnnotation.uidRange}), where the SCC refuses envoy-init`;
  const message = toCni ? `${why}; in CNI mode: ${forbidden ? `${forbids} envoy-init needs` : onOpenShift}` : why;
  if (mode === CaptureMode.initContainer && openshift) {
    warnings.push(`${onOpenShift}: envoy-init runs as root with NET_ADMIN, which OpenShift's restricted-v2 SCC refuses; only an SCC that allows both admits the Pod (capture mode auto or cni captures it through the node instead)`);
  }
  const { interception, warnings: interceptionWarnings } = decideInterception({
    annotations,
    settings,
    cni: mode === CaptureMode.cni,
    templateName: input.template.name,
    namespace: input.namespace,
    namespaceLabels: input.namespaceLabels,
  });
  const groupClashes = interception === Interception.tproxy ? proxyGroupClashes(input.pod, settings.proxyUid) : [];
  return { capture: true, mode, reason, message, settings, exclusions, interception, proxyIds: ids, warnings: [...warnings, ...interceptionWarnings, ...groupClashes] };
}

/**
 * The rules let the proxy's uid out unredirected (`--uid-owner ... RETURN`):
 * a container of the Pod's running as that uid (its own runAsUser, else the
 * Pod's) would reach the network past the proxy. A warning per such
 * container; one whose user only its image sets cannot be known here.
 */
export function proxyUidClashes(pod: JsonObject, proxyUid: number): string[] {
  return containersRunningAs(pod, 'runAsUser', proxyUid).map(
    ({ name, where }) => `container ${describeValue(name)} runs as user ${proxyUid} (${where}), the proxy's uid: the capture rules let that user's traffic past the proxy; run it as another user`,
  );
}

function noSettings(template: SidecarTemplate, asked: boolean | undefined, off: (reason: CaptureReason, message: string, warning?: string) => CaptureDecision): CaptureDecision {
  const message = `template "${template.name}" has no capture settings`;
  return off(CaptureReason.noCaptureSettings, message, asked === true ? `${Annotations.capture}: ${message}; the Pod's traffic is not captured` : undefined);
}

/** A valid annotation replaces the template's default for that list ("" means none); a bad one is ignored with a warning. */
function resolveExclusions(annotations: JsonObject | undefined, defaults: CaptureExclusions, warnings: string[]): CaptureExclusions {
  const pick = (name: CaptureExclusionName): string => {
    const annotation = CAPTURE_EXCLUSION_ANNOTATIONS[name];
    const value = annotations === undefined ? undefined : own(annotations, annotation);
    if (value === undefined) return defaults[name];
    const problem = captureListProblem(CAPTURE_EXCLUSION_KINDS[name], value);
    if (problem === undefined && typeof value === 'string') return value;
    warnings.push(`${annotation}: ${problem ?? 'must be a string'}; ignored, the default ${JSON.stringify(defaults[name])} applies`);
    return defaults[name];
  };
  return {
    excludeOutboundCidrs: pick('excludeOutboundCidrs'),
    excludeOutboundPorts: pick('excludeOutboundPorts'),
    excludeInboundPorts: pick('excludeInboundPorts'),
    includeInboundPorts: pick('includeInboundPorts'),
  };
}

/**
 * The rule script's arguments (init/capture-rules.sh), every one always
 * given; TPROXY adds `--interception=tproxy` and sends inbound to the
 * transparent listener's port (REDIRECT Pods' arguments stay as they were).
 */
export function captureArgs(settings: CaptureSettings, exclusions: CaptureExclusions, interception: Interception = Interception.redirect): string[] {
  const tproxy = interception === Interception.tproxy && settings.tproxyPort !== undefined;
  return [
    `--proxy-uid=${settings.proxyUid}`,
    `--outbound-port=${settings.outboundPort}`,
    `--inbound-port=${tproxy ? settings.tproxyPort : settings.inboundPort}`,
    `--proxy-ports=${settings.proxyPorts.join(',')}`,
    `--exclude-outbound-cidrs=${exclusions.excludeOutboundCidrs}`,
    `--exclude-outbound-ports=${exclusions.excludeOutboundPorts}`,
    `--exclude-inbound-ports=${exclusions.excludeInboundPorts}`,
    `--include-inbound-ports=${exclusions.includeInboundPorts}`,
    ...(tproxy ? ['--interception=tproxy'] : []),
  ];
}

/**
 * The envoy-init container: root in the Pod's network namespace with exactly
 * NET_ADMIN and NET_RAW, nothing else, read-only root; /run is an emptyDir
 * because iptables' legacy backend takes its lock there.
 */
export function captureInitContainer(settings: CaptureSettings, exclusions: CaptureExclusions, interception: Interception = Interception.redirect): JsonObject {
  return {
    name: CAPTURE_INIT_NAME,
    image: settings.image,
    ...(settings.imagePullPolicy === undefined ? {} : { imagePullPolicy: settings.imagePullPolicy }),
    args: captureArgs(settings, exclusions, interception),
    resources: settings.resources,
    securityContext: captureSecurityContext(),
    volumeMounts: [{ name: CAPTURE_LOCK_VOLUME, mountPath: '/run' }],
  };
}

/** Built afresh for each Pod: the patch may share it, nothing else does. */
export function captureSecurityContext(): JsonObject {
  return {
    runAsUser: 0,
    runAsGroup: 0,
    runAsNonRoot: false,
    privileged: false,
    allowPrivilegeEscalation: false,
    readOnlyRootFilesystem: true,
    capabilities: { add: ['NET_ADMIN', 'NET_RAW'], drop: ['ALL'] },
  };
}

export function captureLockVolume(): JsonObject {
  return { name: CAPTURE_LOCK_VOLUME, emptyDir: {} };
}
