import { Type, type Static } from '@sinclair/typebox';

/**
 * The AdmissionReview envelope as the API server sends it (admission.k8s.io/v1),
 * as a JSON Schema that is also the TypeScript type. Unknown fields are
 * allowed: newer API servers may add some.
 */
const GroupVersionKind = Type.Object({ group: Type.String(), version: Type.String(), kind: Type.String() });
const GroupVersionResource = Type.Object({ group: Type.String(), version: Type.String(), resource: Type.String() });
const AnyObject = Type.Object({}, { additionalProperties: true });
const ObjectOrNull = Type.Unsafe<Record<string, unknown> | null>({ type: ['object', 'null'] });
const Operation = Type.Unsafe<'CREATE' | 'UPDATE' | 'DELETE' | 'CONNECT'>({
  type: 'string',
  enum: ['CREATE', 'UPDATE', 'DELETE', 'CONNECT'],
});

export const AdmissionRequestSchema = Type.Object({
  uid: Type.String({ minLength: 1 }),
  kind: GroupVersionKind,
  resource: GroupVersionResource,
  subResource: Type.Optional(Type.String()),
  requestKind: Type.Optional(GroupVersionKind),
  requestResource: Type.Optional(GroupVersionResource),
  requestSubResource: Type.Optional(Type.String()),
  /** Empty for Pods created by controllers (they only have generateName). */
  name: Type.Optional(Type.String()),
  namespace: Type.Optional(Type.String()),
  operation: Operation,
  userInfo: Type.Optional(AnyObject),
  object: Type.Optional(ObjectOrNull),
  oldObject: Type.Optional(ObjectOrNull),
  dryRun: Type.Optional(Type.Boolean()),
  options: Type.Optional(ObjectOrNull),
});

export const AdmissionReviewSchema = Type.Object({
  apiVersion: Type.Literal('admission.k8s.io/v1'),
  kind: Type.Literal('AdmissionReview'),
  request: AdmissionRequestSchema,
});

export type AdmissionRequest = Static<typeof AdmissionRequestSchema>;
export type AdmissionReviewRequest = Static<typeof AdmissionReviewSchema>;
