import { admitPod, isJsonObject, OVERRIDE_ANNOTATION_PREFIX, type AdmitOptions, type Admission, type Reason, type TemplateSet } from '../injection/index.js';
import { allowed, patched, toReview, type AdmissionReviewResponse } from './responses.js';
import type { AdmissionRequest } from './review-schema.js';

/** Everything one review is decided on, read once at its start so it sees one consistent state. */
export interface ReviewContext {
  readonly templates: TemplateSet | undefined;
  /** Labels of `request.namespace`, or undefined when unknown. */
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
  readonly options: AdmitOptions;
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
  const admission = admitPod({
    operation: request.operation,
    kind: request.kind,
    subResource: request.subResource,
    // Controllers' Pods carry no metadata.namespace: the request's is the truth.
    namespace: request.namespace ?? '',
    namespaceLabels: context.namespaceLabels,
    pod,
    templates: context.templates,
    options: context.options,
  });
  const { decision, injection, warnings } = admission;
  const audit: Record<string, string> = {
    decision: decision.inject ? 'injected' : 'skipped',
    reason: decision.reason,
    rule: decision.rule,
  };
  if (!decision.inject || injection === undefined) {
    return { ...admission, review: toReview(request.uid, allowed(audit, warnings)), result: 'skipped', reason: decision.reason };
  }
  audit['template'] = `${decision.template.name}@${decision.template.hash}`;
  if (admission.overrides.length > 0) audit['overrides'] = admission.overrides.map((override) => override.annotation.slice(OVERRIDE_ANNOTATION_PREFIX.length)).join(',');
  return { ...admission, review: toReview(request.uid, patched(injection.patch, audit, warnings)), result: 'injected', reason: decision.reason };
}

/** Semantic checks the schema cannot express; undefined when the request is usable. */
export function requestProblem(request: AdmissionRequest): string | undefined {
  if (request.operation === 'CREATE' && !isJsonObject(request.object)) return 'request.object: must be an object for CREATE';
  return undefined;
}
