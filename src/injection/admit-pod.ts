import {
  annotationsSizeProblem,
  decideInjection,
  DEFAULT_ALLOWED_OVERRIDES,
  Reason,
  resolveOverrides,
  Rule,
  type AppliedOverride,
  type Decision,
  type DecisionInput,
  type DecisionOptions,
  type OverrideName,
} from './decision/index.js';
import {
  captureCheckContainer,
  captureInitContainer,
  captureLockVolume,
  CaptureMode,
  decideCapture,
  namespaceProxyIds,
  planProxyProtocol,
  planTcpProbes,
  proxyConfigInjection,
  withProxyIds,
  type CaptureDecision,
  type ProxyProtocolPlan,
  type TcpProbePlan,
} from './traffic/index.js';
import {
  applyLifecycle,
  decideLifecycle,
  injectPod,
  lifecycleIgnoredWarnings,
  serviceAccountTokenMount,
  serviceAccountTokenVolume,
  type InjectionResult,
  type InjectOptions,
  type LifecycleDecision,
  type ResourceChange,
} from './merge/index.js';
import { Annotations, objectAt, type JsonObject } from './basics/index.js';

export interface AdmitOptions extends DecisionOptions {
  /** Which `envoy-injector.io/proxy-*` annotations Pods may use. */
  readonly allowedOverrides?: readonly OverrideName[];
}

export interface Admission {
  readonly decision: Decision;
  /** Present when the Pod is injected. */
  readonly injection: InjectionResult | undefined;
  readonly overrides: readonly AppliedOverride[];
  /** Present when the Pod is injected: whether its traffic goes through the proxy, and why. */
  readonly capture: CaptureDecision | undefined;
  /** Present when the injected template has a proxyLifecycle section: holding the app, the drain. */
  readonly lifecycle?: LifecycleDecision | undefined;
  /** Present when the Pod is injected: its tcpSocket probes rewritten or left as written under capture (tcp-probes.ts). */
  readonly tcpProbes?: TcpProbePlan | undefined;
  /** Present when the Pod is injected: the ports whose inbound connections get a PROXY protocol header (proxy-protocol.ts). */
  readonly proxyProtocol?: ProxyProtocolPlan | undefined;
  /** Everything a user should hear: the decision's, the overrides', the merge's. */
  readonly warnings: readonly string[];
  /** Skipped as annotations_too_large: whether they would fit without the per-Pod bootstrap, which policy mode never writes (explain --mode policy). */
  readonly fitsWithoutBootstrap?: boolean;
}

/** The whole pure pipeline for one Pod: decide, resolve overrides, merge. The webhook, the CLI and the tests share it. */
export function admitPod(input: DecisionInput & { readonly options: AdmitOptions }): Admission {
  const decision = decideInjection(input);
  if (!decision.inject) return { decision, injection: undefined, overrides: [], capture: undefined, warnings: decision.warnings };
  return injectDecided(input, decision);
}

export type InjectInput = Pick<DecisionInput, 'pod' | 'namespace' | 'namespaceLabels' | 'namespaceAnnotations'> & { readonly options: AdmitOptions };

/**
 * What follows a decision to inject: capture decided, overrides resolved, the
 * template merged, and the result's annotations held to the API server's
 * bound (`bounded`: the webhook's patch memo checks that per request, since
 * it reads the Pod's own annotations, which no shape holds).
 */
export function injectDecided(
  input: InjectInput,
  decision: Extract<Decision, { inject: true }>,
  capture: CaptureDecision = decideCapture({ ...input, template: decision.template }),
  tokenMount: JsonObject | undefined = defaultTokenMount(input.pod),
  bounded = true,
): Admission & { readonly capture: CaptureDecision } {
  const annotations = objectAt(objectAt(input.pod, 'metadata'), 'annotations');
  const overrides = resolveOverrides(annotations, decision.template.containers[0], input.options.allowedOverrides ?? DEFAULT_ALLOWED_OVERRIDES, {
    name: input.namespace,
    annotations: input.namespaceAnnotations,
  });
  const settings = decision.template.proxyLifecycle;
  const lifecycle = settings === undefined ? undefined : decideLifecycle(input.pod, settings, decision.nativeSidecar);
  const probePlan = planTcpProbes(input.pod, capture, decision.nativeSidecar);
  const proxyProtocol = planProxyProtocol(input.pod, capture);
  const proxyConfig = proxyConfigInjection(capture, probePlan, proxyProtocol);
  // The namespace's OpenShift ids, captured or not (capture.ts reads the same ones); TPROXY's proxyConfig comes after, and wins.
  const namespaceIds = namespaceProxyIds(input.namespace, input.namespaceAnnotations);
  const { ids } = namespaceIds;
  const lifecycled =
    settings === undefined || lifecycle === undefined
      ? overrides.apply
      : (container: JsonObject): JsonObject => applyLifecycle(overrides.apply(container), settings, lifecycle, decision.nativeSidecar);
  const identified = ids === undefined ? lifecycled : (container: JsonObject): JsonObject => withProxyIds(lifecycled(container), ids);
  const customizeProxy = proxyConfig === undefined ? identified : (container: JsonObject): JsonObject => proxyConfig.customizeProxy(identified(container));
  const injection = injectPod(input.pod, decision.template, {
    nativeSidecar: decision.nativeSidecar,
    customizeProxy,
    proxyFirst: lifecycle?.hold === true && !decision.nativeSidecar,
    capture: captureEntries(capture),
    tokenMount,
    proxyConfig,
    proxyUid: ids?.uid,
  });
  if (injection.podResourcesProblem !== undefined) return unpaddable(decision, capture, injection.podResourcesProblem);
  const tooLarge = bounded ? annotationsSizeProblem(input.pod, injection.writtenAnnotations) : undefined;
  if (tooLarge !== undefined) return { ...annotationsTooLarge(decision, capture, tooLarge), fitsWithoutBootstrap: fitsWithoutBootstrap(input.pod, injection.writtenAnnotations) };
  return {
    decision,
    injection,
    // The proxy is always ours: a Pod with its own container of that name is not injected (decide-injection.ts, rule proxy-name).
    overrides: overrides.applied,
    capture,
    lifecycle,
    tcpProbes: probePlan,
    proxyProtocol,
    warnings: [
      ...decision.warnings,
      ...capture.warnings,
      ...probePlan.warnings,
      ...proxyProtocol.warnings,
      ...namespaceIds.warnings,
      ...(lifecycle?.warnings ?? lifecycleIgnoredWarnings(input.pod)),
      ...overrides.warnings,
      ...injection.warnings,
      ...paddingWarnings(injection.podResources),
    ],
  };
}

/** What capture adds to the Pod: envoy-init and its lock volume, or in CNI mode the unprivileged check alone. */
function captureEntries(capture: CaptureDecision): InjectOptions['capture'] {
  if (!capture.capture) return undefined;
  if (capture.mode === CaptureMode.cni) return { initContainer: captureCheckContainer(capture.settings, capture.exclusions, capture.proxyIds), volume: undefined, cni: true };
  return { initContainer: captureInitContainer(capture.settings, capture.exclusions, capture.interception), volume: captureLockVolume(), cni: false };
}

/** The merge could not keep the Pod valid: it is left as it was, and says why. */
function unpaddable(decision: Extract<Decision, { inject: true }>, capture: CaptureDecision, problem: string): Admission & { readonly capture: CaptureDecision } {
  const message = `the Pod's spec.resources cannot be padded by what the sidecar adds (${problem})`;
  return leftAsItWas(decision, capture, Reason.podResourcesUnpaddable, Rule.podResources, message, `${message}; the Pod was not injected (as in policy mode), rather than made invalid`);
}

/** The injected Pod's annotations would be over the API server's bound (PROBLEM says by how much, and whose): the Pod is left as it was. */
export function annotationsTooLarge(decision: Extract<Decision, { inject: true }>, capture: CaptureDecision, problem: string): Admission & { readonly capture: CaptureDecision } {
  const message = `the injected Pod would be refused: ${problem}`;
  return leftAsItWas(decision, capture, Reason.annotationsTooLarge, Rule.annotationsSize, message, `${message}; the Pod was not injected, rather than made invalid`);
}

function leftAsItWas(
  decision: Extract<Decision, { inject: true }>,
  capture: CaptureDecision,
  reason: Reason,
  rule: Rule,
  message: string,
  warning: string,
): Admission & { readonly capture: CaptureDecision } {
  const warnings = [...decision.warnings, warning];
  const skipped: Decision = { inject: false, reason, rule, message, warnings, trace: [...decision.trace, { rule, outcome: 'skip', detail: message }] };
  return { decision: skipped, injection: undefined, overrides: [], capture, warnings };
}

/** Whether the annotations WRITTEN but the per-Pod bootstrap's (proxy-config.ts) would fit: what policy mode writes, near enough (its status lacks the bootstrap's record). */
function fitsWithoutBootstrap(pod: JsonObject, written: Readonly<Record<string, string>>): boolean {
  const { [Annotations.proxyConfig]: _bootstrap, [Annotations.tcpProbes]: _probes, ...rest } = written;
  return annotationsSizeProblem(pod, rest) === undefined;
}

/** What was padded, said once (kubectl prints it): the values before and after. */
function paddingWarnings(changes: readonly ResourceChange[] | undefined): string[] {
  if (changes === undefined || changes.length === 0) return [];
  const list = changes.map(({ field, before, after }) => `${field.slice('spec.resources.'.length)} ${before} -> ${after}`).join(', ');
  return [`spec.resources: padded by what the injected containers add, so the app keeps what the Pod asked for: ${list}`];
}

/** The ServiceAccount token mount the API server would give the added containers, of the Pod's own volume. */
function defaultTokenMount(pod: JsonObject): JsonObject | undefined {
  const volume = serviceAccountTokenVolume(pod);
  return volume === undefined ? undefined : serviceAccountTokenMount(volume);
}
