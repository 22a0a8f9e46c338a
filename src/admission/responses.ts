import type { PatchOperation } from '../injection/index.js';

/** admission.k8s.io/v1 AdmissionResponse; we never deny, only patch or allow. */
export interface AdmissionResponse {
  readonly uid: string;
  readonly allowed: true;
  readonly patchType?: 'JSONPatch';
  /** base64 of the JSON Patch. */
  readonly patch?: string;
  readonly auditAnnotations?: Readonly<Record<string, string>>;
  readonly warnings?: readonly string[];
}

export interface AdmissionReviewResponse {
  readonly apiVersion: 'admission.k8s.io/v1';
  readonly kind: 'AdmissionReview';
  readonly response: AdmissionResponse;
}

type ResponseBody = Omit<AdmissionResponse, 'uid'>;

/** Allowed unchanged: no patch and no patchType (the API server rejects a patchType without patch). */
export function allowed(auditAnnotations: Readonly<Record<string, string>>, warnings: readonly string[]): ResponseBody {
  return { allowed: true, auditAnnotations, ...(warnings.length > 0 ? { warnings } : {}) };
}

/** Allowed with a JSON Patch; an empty patch is answered as `allowed`. */
export function patched(
  patch: readonly PatchOperation[],
  auditAnnotations: Readonly<Record<string, string>>,
  warnings: readonly string[],
): ResponseBody {
  if (patch.length === 0) return allowed(auditAnnotations, warnings);
  return {
    ...allowed(auditAnnotations, warnings),
    patchType: 'JSONPatch',
    patch: Buffer.from(JSON.stringify(patch)).toString('base64'),
  };
}

/** The one place the request's uid and version are echoed. */
export function toReview(uid: string, body: ResponseBody): AdmissionReviewResponse {
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response: { uid, ...body } };
}
