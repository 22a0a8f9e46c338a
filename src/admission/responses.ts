import type { JsonValue, PatchOperation } from '../injection/index.js';

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

// The responses are whole object literals, not spreads of one another: under load, objects
// built by spreading these measured 300-700 bytes per review promoted to V8's old space
// (`--trace-gc-nvp`), so the heap grew and full GCs ran; literals measured ~10 (issue 14).

/** Allowed unchanged: no patch and no patchType (the API server rejects a patchType without patch). */
export function allowed(uid: string, auditAnnotations: Readonly<Record<string, string>>, warnings: readonly string[]): AdmissionResponse {
  return warnings.length > 0 ? { uid, allowed: true, auditAnnotations, warnings } : { uid, allowed: true, auditAnnotations };
}

/** Allowed with an encoded, non-empty JSON Patch (base64, see encodePatchBase64). */
export function patched(uid: string, patchBase64: string, auditAnnotations: Readonly<Record<string, string>>, warnings: readonly string[]): AdmissionResponse {
  return warnings.length > 0
    ? { uid, allowed: true, auditAnnotations, warnings, patchType: 'JSONPatch', patch: patchBase64 }
    : { uid, allowed: true, auditAnnotations, patchType: 'JSONPatch', patch: patchBase64 };
}

/** The JSON Patch as an AdmissionResponse carries it. */
export function encodePatchBase64(patch: readonly PatchOperation[]): string {
  return Buffer.from(encodePatch(patch)).toString('base64');
}

/**
 * JSON.stringify(patch), with the JSON of frozen values (the template's
 * entries, shared by every Pod injected from it) computed once: most of a
 * patch is the same sidecar, request after request.
 */
export function encodePatch(patch: readonly PatchOperation[]): string {
  return `[${patch.map((operation) => `{"op":"add","path":${JSON.stringify(operation.path)},"value":${encodeValue(operation.value)}}`).join(',')}]`;
}

const frozenJson = new WeakMap<object, string>();

function encodeValue(value: JsonValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (Array.isArray(value) && !Object.isFrozen(value)) return `[${value.map(encodeValue).join(',')}]`;
  if (!Object.isFrozen(value)) return JSON.stringify(value);
  let json = frozenJson.get(value);
  if (json === undefined) {
    json = JSON.stringify(value);
    frozenJson.set(value, json);
  }
  return json;
}

/** The review around a response: the one place the version is echoed. */
export function toReview(response: AdmissionResponse): AdmissionReviewResponse {
  return { apiVersion: 'admission.k8s.io/v1', kind: 'AdmissionReview', response };
}
