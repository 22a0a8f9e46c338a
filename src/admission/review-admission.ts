import {
  ALL_OVERRIDES,
  annotationsSizeProblem,
  annotationsTooLarge,
  decideCapture,
  decideInjection,
  DEFAULT_ALLOWED_OVERRIDES,
  entryName,
  injectDecided,
  isJsonObject,
  objectAt,
  OPENSHIFT_ID_ANNOTATIONS,
  OVERRIDE_ANNOTATION_PREFIX,
  planProxyProtocol,
  planTcpProbes,
  Reason,
  restoreInitOrder,
  serviceAccountTokenVolume,
  TOKEN_MOUNT_PLACEHOLDER,
  type AdmitOptions,
  type Admission,
  type Decision,
  type PatchOperation,
  type TemplateSet,
} from '../injection/index.js';
import { podShape, type MemoizedInjection, type PatchMemo, type ShapeNames } from './patch-memo.js';
import { allowed, encodePatchBase64, encodePatchPieces, fillPatch, patched, toReview, type AdmissionReviewResponse } from './responses.js';
import type { AdmissionRequest } from './review-schema.js';

/** Everything one review is decided on, read once at its start so it sees one consistent state. */
export interface ReviewContext {
  readonly templates: TemplateSet | undefined;
  /** Labels of `request.namespace`, or undefined when unknown. */
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
  /** Its `envoy-injector.io/` annotations (the proxy defaults), or undefined when unknown or none. */
  readonly namespaceAnnotations?: Readonly<Record<string, string>> | undefined;
  readonly options: AdmitOptions;
  /** Answers already computed for this template set, by Pod shape; none computes every answer. */
  readonly memo?: PatchMemo | undefined;
}

export interface ReviewOutcome extends Admission {
  readonly review: AdmissionReviewResponse;
  readonly result: 'injected' | 'skipped';
  readonly reason: Reason;
}

/**
 * Turns a validated AdmissionRequest into the response: pure, so that
 * `dryRun` requests get exactly the answer real ones get.
 */
export function reviewAdmission(request: AdmissionRequest, context: ReviewContext): ReviewOutcome {
  const pod = isJsonObject(request.object) ? request.object : {};
  const input = {
    operation: request.operation,
    kind: request.kind,
    subResource: request.subResource,
    // Controllers' Pods carry no metadata.namespace: the request's is the truth.
    namespace: request.namespace ?? '',
    namespaceLabels: context.namespaceLabels,
    namespaceAnnotations: context.namespaceAnnotations,
    pod,
    templates: context.templates,
    options: context.options,
  };
  const decision = decideInjection(input);
  const audit: Record<string, string> = {
    decision: decision.inject ? 'injected' : 'skipped',
    reason: decision.reason,
    rule: decision.rule,
  };
  if (!decision.inject) {
    // A reinvocation after another webhook: the order of init containers our design needs, restored (docs/design.md §14).
    const reorder = decision.reason === Reason.alreadyInjected ? restoreInitOrder(pod) : [];
    if (reorder.length > 0) return reordered(request, decision, audit, reorder);
    // One literal, no spread (see responses.ts).
    return {
      decision,
      injection: undefined,
      overrides: [],
      capture: undefined,
      warnings: decision.warnings,
      review: toReview(allowed(request.uid, audit, decision.warnings)),
      result: 'skipped',
      reason: decision.reason,
    };
  }
  // Per request, as the decision (it reads the namespace's labels); the patch depends only on its outcome.
  const capture = decideCapture({ pod, template: decision.template, namespace: input.namespace, namespaceLabels: input.namespaceLabels, namespaceAnnotations: input.namespaceAnnotations });
  // The ServiceAccount token volume, per Pod (its name has a random suffix): the patch leaves a gap for its name.
  const tokenVolume = serviceAccountTokenVolume(pod);
  const tokenMount = tokenVolume === undefined ? undefined : TOKEN_MOUNT_PLACEHOLDER;
  // Pod-level resources are padded from the Pod's own values, which no shape holds: computed per request, and may skip the Pod.
  const direct = objectAt(objectAt(pod, 'spec'), 'resources') === undefined ? undefined : injectDecided(input, decision, capture, tokenMount);
  if (direct !== undefined && direct.injection === undefined) return skippedAfterMerge(request, direct);
  const compute = (): MemoizedInjection => {
    // Unbounded: the bound reads the Pod's own annotations, which no shape holds; it is checked per request below.
    const { injection, overrides, warnings } = direct ?? injectDecided(input, decision, capture, tokenMount, false);
    if (injection === undefined) throw new Error('a merge without spec.resources always injects');
    // Its warnings start with the decision's and the capture's, which are per request.
    return { injection, overrides, warnings: warnings.slice(decision.warnings.length + capture.warnings.length), patch: encodePatchPieces(injection.patch) };
  };
  const { memo, templates } = context;
  // The namespace's proxy defaults shape the patch and its warnings (which name the namespace) too.
  // The tcpSocket probes to rewrite (none but under capture) shape the patch: where they are, and what each holds.
  const probes = planTcpProbes(pod, capture, decision.nativeSidecar);
  const probesKey = probes.rewrites.length + probes.kept.length + probes.warnings.length === 0 ? '' : JSON.stringify(probes);
  // So do the PROXY protocol's ports (and its warnings, which the memo keeps).
  const proxyProtocol = planProxyProtocol(pod, capture);
  const headerKey = proxyProtocol.ports.length + proxyProtocol.warnings.length === 0 ? '' : JSON.stringify(proxyProtocol);
  // `auto` turns to CNI mode by the namespace's labels: the mode is part of the outcome.
  const captureKey = (capture.capture ? `${capture.mode}:${capture.interception}:${JSON.stringify(capture.exclusions)}` : '') + probesKey + headerKey + namespaceDefaultsKey(input.namespace, context.namespaceAnnotations) + namespaceIdsKey(context.namespaceAnnotations);
  const { template, nativeSidecar } = decision;
  const settings = { template, nativeSidecar, allowedOverrides: context.options.allowedOverrides ?? DEFAULT_ALLOWED_OVERRIDES, namespace: input.namespace, captureKey, tokenMount: tokenVolume !== undefined };
  const shape = (names: ShapeNames): string => podShape(pod, names, settings);
  const perPod = memo === undefined || templates === undefined || direct !== undefined;
  const { injection, overrides, warnings: injectionWarnings, patch: pieces } = perPod ? compute() : memo.answer(templates, shape, compute);
  // Per request: the Pod's own annotations count too, and no shape holds them.
  const tooLarge = direct === undefined ? annotationsSizeProblem(pod, injection.writtenAnnotations) : undefined;
  if (tooLarge !== undefined) return skippedAfterMerge(request, annotationsTooLarge(decision, capture, tooLarge));
  const patch = fillPatch(pieces, tokenVolume);
  // Most injected Pods hear nothing: no array made for them.
  const warnings = decision.warnings.length + capture.warnings.length + injectionWarnings.length === 0 ? NO_WARNINGS : [...decision.warnings, ...capture.warnings, ...injectionWarnings];
  audit['template'] = `${decision.template.name}@${decision.template.hash}`;
  if (overrides.length > 0) audit['overrides'] = overrides.map((override) => override.annotation.slice(OVERRIDE_ANNOTATION_PREFIX.length)).join(',');
  return { decision, injection, overrides, capture, warnings, review: toReview(patched(request.uid, patch, audit, warnings)), result: 'injected', reason: decision.reason };
}

const NO_WARNINGS: readonly string[] = Object.freeze([]);

/** The answer for a Pod the merge left as it was (its resources unpaddable, its annotations too large), with the reason why. */
function skippedAfterMerge(request: AdmissionRequest, admission: Admission): ReviewOutcome {
  const { decision } = admission;
  return { ...admission, review: toReview(allowed(request.uid, { decision: 'skipped', reason: decision.reason, rule: decision.rule }, admission.warnings)), result: 'skipped', reason: decision.reason };
}

/** The answer that puts our init containers back where the design needs them. */
function reordered(request: AdmissionRequest, decision: Decision, audit: Record<string, string>, patch: readonly PatchOperation[]): ReviewOutcome {
  const list = patch[0]?.value;
  const order = Array.isArray(list) ? list.map((entry) => entryName(entry) ?? '').join(', ') : '';
  const warnings = [...decision.warnings, `spec.initContainers: another admission webhook changed the order the sidecar needs; restored the order of init containers: ${order}`];
  const answer = patched(request.uid, encodePatchBase64(patch), { ...audit, reordered: 'true' }, warnings);
  return { decision, injection: undefined, overrides: [], capture: undefined, warnings, review: toReview(answer), result: 'skipped', reason: decision.reason };
}

/** "" without namespace proxy defaults, else the namespace and its override annotations' values. */
function namespaceDefaultsKey(namespace: string, annotations: Readonly<Record<string, string>> | undefined): string {
  if (annotations === undefined) return '';
  const values = ALL_OVERRIDES.map((name) => annotations[OVERRIDE_ANNOTATION_PREFIX + name] ?? null);
  return values.every((value) => value === null) ? '' : JSON.stringify(['namespace', namespace, values]);
}

/**
 * "" without OpenShift's ranges, else their values: the proxy's ids come from
 * them (a range changed in place must not be served the old answer; the
 * namespace itself ends every key).
 */
function namespaceIdsKey(annotations: Readonly<Record<string, string>> | undefined): string {
  if (annotations === undefined) return '';
  const values = OPENSHIFT_ID_ANNOTATIONS.map((name) => (Object.hasOwn(annotations, name) ? (annotations[name] ?? null) : null));
  return values.every((value) => value === null) ? '' : JSON.stringify(['ids', values]);
}

/** Semantic checks the schema cannot express; undefined when the request is usable. */
export function requestProblem(request: AdmissionRequest): string | undefined {
  if (request.operation === 'CREATE' && !isJsonObject(request.object)) return 'request.object: must be an object for CREATE';
  return undefined;
}
