import { randomUUID } from 'node:crypto';
import { reviewAdmission, type AdmissionRequest, type ReviewContext } from '../../src/admission/index.js';
import { applyPodPatch, type JsonObject } from '../../src/injection/index.js';

/** An AdmissionReview for a Pod CREATE, shaped as the API server sends it (controller Pod: generateName only). */
export function podReview(options: { namespace: string; annotations?: Record<string, string>; dryRun?: boolean }): JsonObject {
  return {
    apiVersion: 'admission.k8s.io/v1',
    kind: 'AdmissionReview',
    request: {
      uid: randomUUID(),
      kind: { group: '', version: 'v1', kind: 'Pod' },
      resource: { group: '', version: 'v1', resource: 'pods' },
      requestKind: { group: '', version: 'v1', kind: 'Pod' },
      requestResource: { group: '', version: 'v1', resource: 'pods' },
      name: '',
      namespace: options.namespace,
      operation: 'CREATE',
      userInfo: { username: 'system:serviceaccount:kube-system:replicaset-controller' },
      object: {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { generateName: 'web-5d8f7-', labels: { app: 'web' }, ...(options.annotations === undefined ? {} : { annotations: options.annotations }) },
        spec: { containers: [{ name: 'web', image: 'nginx:1.27' }] },
      },
      oldObject: null,
      dryRun: options.dryRun ?? false,
      options: { kind: 'CreateOptions', apiVersion: 'meta.k8s.io/v1' },
    },
  };
}

export interface DecodedReview {
  readonly uid: string;
  readonly patch: { op: string; path: string; value?: unknown }[];
  readonly warnings: string[];
  readonly audit: Record<string, string>;
}

/** An AdmissionResponse's base64 JSON Patch, decoded; none is an empty patch. */
function decodePatch(patch: string | undefined): DecodedReview['patch'] {
  return patch === undefined ? [] : (JSON.parse(Buffer.from(patch, 'base64').toString('utf8')) as DecodedReview['patch']);
}

export function decodeReview(body: string): DecodedReview {
  const review = JSON.parse(body) as { response: { uid: string; patch?: string; warnings?: string[]; auditAnnotations?: Record<string, string> } };
  const { response } = review;
  return {
    uid: response.uid,
    patch: decodePatch(response.patch),
    warnings: response.warnings ?? [],
    audit: response.auditAnnotations ?? {},
  };
}

/** The image of each container the patch adds (classic sidecars). */
export function addedImages(review: DecodedReview): string[] {
  return review.patch.filter((op) => op.path === '/spec/containers/-').map((op) => String((op.value as { image?: string }).image));
}

/** The volume names the patch adds, whole list or one by one. */
export function addedVolumes(review: DecodedReview): string[] {
  return review.patch.flatMap((op) => {
    if (op.path === '/spec/volumes') return (op.value as { name: string }[]).map((v) => v.name);
    if (op.path === '/spec/volumes/-') return [(op.value as { name: string }).name];
    return [];
  });
}

/** OBJECT as the webhook's core (reviewAdmission, CONTEXT's patch memo included) answers its CREATE in NAMESPACE, the patch applied: the Pod as stored. */
export function storedThroughReview(object: JsonObject, uid: string, namespace: string, context: ReviewContext): JsonObject {
  const request = { uid, kind: { group: '', version: 'v1', kind: 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, operation: 'CREATE', namespace, object } as AdmissionRequest;
  const { review } = reviewAdmission(request, context);
  return applyPodPatch(object, decodePatch(review.response.patch) as Parameters<typeof applyPodPatch>[1]);
}
