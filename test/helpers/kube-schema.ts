import { ObjectSerializer } from '@kubernetes/client-node/dist/gen/models/ObjectSerializer.js';
import { MutatingWebhookConfiguration } from 'kubernetes-models/admissionregistration.k8s.io/v1';
import { DaemonSet, Deployment } from 'kubernetes-models/apps/v1';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1';
import { ClusterRole, ClusterRoleBinding, Role, RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1';
import { ConfigMap, Pod, Secret, Service, ServiceAccount } from 'kubernetes-models/v1';
import type { Manifest } from './helm.js';

/**
 * Offline schema checks of a rendered manifest, three ways, as none is enough
 * alone:
 * 1. kubernetes-models' compiled OpenAPI schema: types, enums, required fields
 *    (it lets unknown fields through);
 * 2. a round trip through @kubernetes/client-node's typed models, which drop
 *    what they do not know: whatever vanishes is an unknown field (a typo the
 *    API server would silently prune, or reject under strict field validation);
 * 3. both model a Kubernetes newer than 1.28, so fields added after 1.28 that a
 *    chart could plausibly use are refused by name.
 * cert-manager kinds are not in either library: they get a shape check of the
 * fields we use (see CERT_MANAGER_SHAPES).
 */
export function schemaProblems(manifest: Manifest): string[] {
  const where = `${manifest.kind}/${manifest.metadata?.name ?? '?'}`;
  const problems: string[] = [];
  const typed = TYPED[`${manifest.apiVersion}/${manifest.kind}`];
  if (typed !== undefined) {
    problems.push(...openApiProblems(typed.model, manifest), ...unknownFields(manifest, typed.clientType));
  } else if (manifest.apiVersion === 'cert-manager.io/v1') {
    problems.push(...certManagerProblems(manifest), ...unknownFields(manifest.metadata, 'V1ObjectMeta', '/metadata'));
  } else {
    problems.push(`no schema known for ${manifest.apiVersion} ${manifest.kind}`);
  }
  problems.push(...newerThan128(manifest));
  return problems.map((problem) => `${where}: ${problem}`);
}

type Model = new (data: never) => { validate(): void };

const TYPED: Readonly<Record<string, { model: Model; clientType: string }>> = {
  'v1/ConfigMap': { model: ConfigMap as Model, clientType: 'V1ConfigMap' },
  'v1/Pod': { model: Pod as Model, clientType: 'V1Pod' },
  'v1/Secret': { model: Secret as Model, clientType: 'V1Secret' },
  'v1/Service': { model: Service as Model, clientType: 'V1Service' },
  'v1/ServiceAccount': { model: ServiceAccount as Model, clientType: 'V1ServiceAccount' },
  'apps/v1/Deployment': { model: Deployment as Model, clientType: 'V1Deployment' },
  'apps/v1/DaemonSet': { model: DaemonSet as Model, clientType: 'V1DaemonSet' },
  'policy/v1/PodDisruptionBudget': { model: PodDisruptionBudget as Model, clientType: 'V1PodDisruptionBudget' },
  'autoscaling/v2/HorizontalPodAutoscaler': { model: HorizontalPodAutoscaler as Model, clientType: 'V2HorizontalPodAutoscaler' },
  'rbac.authorization.k8s.io/v1/Role': { model: Role as Model, clientType: 'V1Role' },
  'rbac.authorization.k8s.io/v1/RoleBinding': { model: RoleBinding as Model, clientType: 'V1RoleBinding' },
  'rbac.authorization.k8s.io/v1/ClusterRole': { model: ClusterRole as Model, clientType: 'V1ClusterRole' },
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': { model: ClusterRoleBinding as Model, clientType: 'V1ClusterRoleBinding' },
  'admissionregistration.k8s.io/v1/MutatingWebhookConfiguration': {
    model: MutatingWebhookConfiguration as Model,
    clientType: 'V1MutatingWebhookConfiguration',
  },
};

function openApiProblems(model: Model, manifest: Manifest): string[] {
  try {
    new model(structuredClone(manifest) as never).validate();
    return [];
  } catch (error) {
    const errors = (error as { errors?: { instancePath: string; message?: string }[] }).errors;
    if (errors === undefined) throw error;
    return errors.map((entry) => `${entry.instancePath || '/'}: ${entry.message ?? 'invalid'}`);
  }
}

/** Paths of `value` that do not survive a round trip through client-node's model `type`. */
function unknownFields(value: unknown, type: string, base = ''): string[] {
  const roundTrip: unknown = ObjectSerializer.serialize(ObjectSerializer.deserialize(structuredClone(value), type, ''), type, '');
  const lost: string[] = [];
  const walk = (original: unknown, kept: unknown, path: string): void => {
    if (Array.isArray(original)) {
      original.forEach((entry, index) => walk(entry, Array.isArray(kept) ? kept[index] : undefined, `${path}/${index}`));
    } else if (original !== null && typeof original === 'object') {
      for (const [key, entry] of Object.entries(original)) {
        const keptObject = kept !== null && typeof kept === 'object' ? (kept as Record<string, unknown>) : {};
        if (!Object.hasOwn(keptObject, key)) lost.push(`${path}/${key}: unknown field`);
        else walk(entry, keptObject[key], `${path}/${key}`);
      }
    }
  };
  walk(value, roundTrip, base);
  return lost;
}

/** Fields that Kubernetes 1.28 does not have, by the version that added them. */
const AFTER_1_28: readonly { key: string; since: string; parent?: RegExp }[] = [
  { key: 'sleep', since: '1.29 (sleep lifecycle action)', parent: /\/lifecycle\/(preStop|postStart)$/ },
  { key: 'appArmorProfile', since: '1.30' },
  { key: 'recursiveReadOnly', since: '1.30' },
  { key: 'trafficDistribution', since: '1.31' },
  { key: 'supplementalGroupsPolicy', since: '1.31' },
  { key: 'image', since: '1.31 (image volumes)', parent: /\/volumes\/\d+$/ },
  { key: 'resources', since: '1.32 (Pod-level resources)', parent: /\/template\/spec$/ },
  { key: 'seLinuxChangePolicy', since: '1.32' },
  { key: 'stopSignal', since: '1.33' },
  { key: 'restartPolicyRules', since: '1.34' },
  { key: 'fileKeyRef', since: '1.34' },
  { key: 'hostnameOverride', since: '1.34' },
];

function newerThan128(manifest: Manifest): string[] {
  const found: string[] = [];
  const walk = (value: unknown, path: string): void => {
    if (Array.isArray(value)) value.forEach((entry, index) => walk(entry, `${path}/${index}`));
    else if (value !== null && typeof value === 'object') {
      for (const [key, entry] of Object.entries(value)) {
        // ConfigMap data and annotation values are text, not API fields.
        if (path === '/data' || path.endsWith('/annotations') || path.endsWith('/labels')) continue;
        const rule = AFTER_1_28.find((candidate) => candidate.key === key && (candidate.parent === undefined || candidate.parent.test(path)));
        if (rule !== undefined) found.push(`${path}/${key}: not in Kubernetes 1.28 (added in ${rule.since})`);
        walk(entry, `${path}/${key}`);
      }
    }
  };
  walk(manifest, '');
  return found;
}

type Shape = { readonly [field: string]: FieldShape };
type FieldShape =
  | 'string'
  | 'boolean'
  | 'integer'
  | 'duration'
  | { readonly enum: readonly string[] }
  | { readonly list: FieldShape }
  | { readonly object: Shape; readonly required?: readonly string[] };

const ISSUER_REF: FieldShape = { object: { name: 'string', kind: { enum: ['Issuer', 'ClusterIssuer'] }, group: 'string' }, required: ['name'] };

/** cert-manager.io/v1, the fields of Issuer and Certificate this chart may use. */
const CERT_MANAGER_SHAPES: Readonly<Record<string, { spec: FieldShape; oneOf?: readonly string[] }>> = {
  Issuer: {
    spec: {
      object: {
        selfSigned: { object: { crlDistributionPoints: { list: 'string' } } },
        ca: { object: { secretName: 'string', crlDistributionPoints: { list: 'string' }, issuingCertificateURLs: { list: 'string' }, ocspServers: { list: 'string' } }, required: ['secretName'] },
      },
    },
    oneOf: ['selfSigned', 'ca'],
  },
  Certificate: {
    spec: {
      object: {
        secretName: 'string',
        issuerRef: ISSUER_REF,
        commonName: 'string',
        dnsNames: { list: 'string' },
        ipAddresses: { list: 'string' },
        isCA: 'boolean',
        duration: 'duration',
        renewBefore: 'duration',
        usages: {
          list: {
            enum: ['signing', 'digital signature', 'content commitment', 'key encipherment', 'key agreement', 'data encipherment', 'cert sign', 'crl sign', 'encipher only', 'decipher only', 'any', 'server auth', 'client auth', 'code signing', 'email protection', 's/mime', 'ipsec end system', 'ipsec tunnel', 'ipsec user', 'timestamping', 'ocsp signing', 'microsoft sgc', 'netscape sgc'],
          },
        },
        privateKey: {
          object: { algorithm: { enum: ['RSA', 'ECDSA', 'Ed25519'] }, encoding: { enum: ['PKCS1', 'PKCS8'] }, size: 'integer', rotationPolicy: { enum: ['Never', 'Always'] } },
        },
        secretTemplate: { object: { annotations: { object: {} }, labels: { object: {} } } },
        revisionHistoryLimit: 'integer',
      },
      required: ['secretName', 'issuerRef'],
    },
  },
};

function certManagerProblems(manifest: Manifest): string[] {
  const shape = CERT_MANAGER_SHAPES[manifest.kind];
  if (shape === undefined) return [`cert-manager kind ${manifest.kind} has no shape here`];
  const problems: string[] = [];
  for (const key of Object.keys(manifest)) {
    if (!['apiVersion', 'kind', 'metadata', 'spec'].includes(key)) problems.push(`/${key}: unknown field`);
  }
  checkShape(manifest['spec'], shape.spec, '/spec', problems);
  if (shape.oneOf !== undefined) {
    const spec = (manifest['spec'] ?? {}) as Record<string, unknown>;
    const present = shape.oneOf.filter((key) => Object.hasOwn(spec, key));
    if (present.length !== 1) problems.push(`/spec: exactly one of ${shape.oneOf.join(', ')} (found ${present.length})`);
  }
  return problems;
}

function checkShape(value: unknown, shape: FieldShape, path: string, problems: string[]): void {
  if (shape === 'string' || shape === 'duration') {
    if (typeof value !== 'string') problems.push(`${path}: must be a string`);
    else if (shape === 'duration' && !/^(\d+(\.\d+)?(h|m|s|ms|us|ns))+$/.test(value)) problems.push(`${path}: "${value}" is not a Go duration`);
  } else if (shape === 'boolean') {
    if (typeof value !== 'boolean') problems.push(`${path}: must be a boolean`);
  } else if (shape === 'integer') {
    if (!Number.isInteger(value)) problems.push(`${path}: must be an integer`);
  } else if ('enum' in shape) {
    if (typeof value !== 'string' || !shape.enum.includes(value)) problems.push(`${path}: must be one of ${shape.enum.join(', ')}`);
  } else if ('list' in shape) {
    if (!Array.isArray(value)) problems.push(`${path}: must be a list`);
    else value.forEach((entry, index) => checkShape(entry, shape.list, `${path}/${index}`, problems));
  } else {
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      problems.push(`${path}: must be a mapping`);
      return;
    }
    const fields = Object.keys(shape.object);
    const record = value as Record<string, unknown>;
    if (fields.length > 0) {
      for (const [key, entry] of Object.entries(record)) {
        const fieldShape = shape.object[key];
        if (fieldShape === undefined) problems.push(`${path}/${key}: unknown field`);
        else checkShape(entry, fieldShape, `${path}/${key}`, problems);
      }
    }
    for (const key of shape.required ?? []) if (!Object.hasOwn(record, key)) problems.push(`${path}/${key}: required`);
  }
}
