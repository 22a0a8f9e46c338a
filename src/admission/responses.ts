import { SERVICE_ACCOUNT_TOKEN_PATH, TOKEN_MOUNT_PLACEHOLDER, type JsonValue, type PatchOperation } from '../injection/index.js';

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
 * The patch's base64 in pieces, between which the token volume's name goes
 * (`fillPatch`): where the patch holds TOKEN_MOUNT_PLACEHOLDER, the name is
 * left open. Each piece but the last encodes a multiple of 3 bytes (padded
 * with spaces, which JSON allows between tokens), and so does the name, so
 * the pieces' base64 joined is the base64 of the joined JSON: per request,
 * only the name is encoded. A patch without the placeholder is one piece,
 * byte for byte encodePatchBase64's.
 */
export function encodePatchPieces(patch: readonly PatchOperation[]): readonly string[] {
  const parts = encodePatch(patch).split(TOKEN_GAP);
  return parts.map((part, index) => Buffer.from(index === parts.length - 1 ? part : padToThree(part)).toString('base64'));
}

/** The patch of PIECES with VOLUMENAME in every gap, as base64. */
export function fillPatch(pieces: readonly string[], volumeName: string | undefined): string {
  if (pieces.length === 1) return pieces[0] ?? '';
  if (volumeName === undefined) throw new Error('the patch names the token volume, and none was given');
  return pieces.join(Buffer.from(padToThree(JSON.stringify(volumeName))).toString('base64'));
}

function padToThree(json: string): string {
  const extra = Buffer.byteLength(json) % 3;
  return extra === 0 ? json : json + ' '.repeat(3 - extra);
}

/**
 * JSON.stringify(patch), with the JSON of frozen values (the template's
 * entries, shared by every Pod injected from it) computed once: most of a
 * patch is the same sidecar, request after request. The token mount
 * placeholder is written with TOKEN_GAP for its name (see encodePatchPieces).
 */
export function encodePatch(patch: readonly PatchOperation[]): string {
  return `[${patch.map((operation) => `{"op":"add","path":${JSON.stringify(operation.path)},"value":${encodeValue(operation.value)}}`).join(',')}]`;
}

/** Where the token volume's name goes: a NUL byte, which JSON text never holds raw (JSON.stringify escapes it). */
const TOKEN_GAP = '\u0000';
const PLACEHOLDER_JSON = `{"name":${TOKEN_GAP},"readOnly":true,"mountPath":${JSON.stringify(SERVICE_ACCOUNT_TOKEN_PATH)}}`;

const frozenJson = new WeakMap<object, string>();

function encodeValue(value: JsonValue): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value);
  if (value === TOKEN_MOUNT_PLACEHOLDER) return PLACEHOLDER_JSON;
  if (Array.isArray(value)) return Object.isFrozen(value) ? cachedJson(value) : `[${value.map(encodeValue).join(',')}]`;
  if (!Object.isFrozen(value)) {
    // A copy of a template entry (a native sidecar, a token mount added): its frozen parts keep their cached JSON.
    const members: string[] = [];
    for (const key of Object.keys(value)) {
      const member = value[key];
      if (member !== undefined) members.push(`${JSON.stringify(key)}:${encodeValue(member)}`);
    }
    return `{${members.join(',')}}`;
  }
  return cachedJson(value);
}

function cachedJson(value: object): string {
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
