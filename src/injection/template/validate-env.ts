import { checkOneOf, DNS1123_SUBDOMAIN, forEachNested, isUnset, type ProblemList } from './entry-checks.js';
import { isJsonObject, own, stringAt, type JsonObject } from '../basics/index.js';

/**
 * Kubernetes before 1.32 (RelaxedEnvironmentVariableValidation) refuses other
 * names; a template must work on every cluster it may serve, so the strict
 * rule applies.
 */
const ENV_NAME = /^[-._a-zA-Z][-._a-zA-Z0-9]*$/;
const CONFIG_KEY = /^[-._a-zA-Z0-9]+$/;
/** The prefix and name of a label or annotation key (a qualified name). */
const QUALIFIED_NAME = /^(?:[a-z0-9]([-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;

const ENV_FIELD_PATHS = new Set([
  'metadata.name', 'metadata.namespace', 'metadata.uid', 'spec.nodeName', 'spec.serviceAccountName',
  'status.hostIP', 'status.hostIPs', 'status.podIP', 'status.podIPs',
]);
export const VOLUME_FIELD_PATHS: ReadonlySet<string> = new Set(['metadata.name', 'metadata.namespace', 'metadata.uid', 'metadata.labels', 'metadata.annotations']);
const RESOURCE_FIELDS = /^(limits|requests)\.(cpu|memory|ephemeral-storage|hugepages-.+)$/;

/** `env` and `envFrom` of a container, as the API server's validateEnv and validateEnvFrom. */
export function checkEnv(container: JsonObject, path: string, problems: ProblemList): void {
  // Duplicate names are allowed: the API server only warns, the last one wins.
  forEachNested(container, 'env', (variable, envPath) => {
    const fullPath = `${path}.${envPath}`;
    const name = own(variable, 'name');
    if (isUnset(name)) problems.add(`${fullPath}.name`, 'required');
    else if (typeof name === 'string' && !ENV_NAME.test(name)) {
      problems.add(`${fullPath}.name`, `"${name}" must be letters, digits, '_', '-' or '.', not starting with a digit`);
    }
    const value = own(variable, 'value');
    const valueFrom = own(variable, 'valueFrom');
    if (value !== undefined && value !== null && value !== '' && valueFrom !== undefined && valueFrom !== null) {
      problems.add(fullPath, 'may not have both value and valueFrom');
    }
    if (!isJsonObject(valueFrom)) return;
    const sourcePath = `${fullPath}.valueFrom`;
    checkOneOf(valueFrom, sourcePath, ['fieldRef', 'resourceFieldRef', 'configMapKeyRef', 'secretKeyRef', 'fileKeyRef'], problems);
    checkFieldRef(own(valueFrom, 'fieldRef'), `${sourcePath}.fieldRef`, ENV_FIELD_PATHS, problems);
    checkResourceFieldRef(own(valueFrom, 'resourceFieldRef'), `${sourcePath}.resourceFieldRef`, false, problems);
    for (const selector of ['configMapKeyRef', 'secretKeyRef'] as const) {
      const keyRef = own(valueFrom, selector);
      if (!isJsonObject(keyRef)) continue;
      checkObjectName(keyRef, `${sourcePath}.${selector}`, problems);
      const key = own(keyRef, 'key');
      if (isUnset(key)) problems.add(`${sourcePath}.${selector}.key`, 'required');
      else if (typeof key === 'string' && (key.length > 253 || !CONFIG_KEY.test(key))) {
        problems.add(`${sourcePath}.${selector}.key`, `"${key}" must be letters, digits, '-', '_' or '.'`);
      }
    }
  });
  forEachNested(container, 'envFrom', (source, sourcePath) => {
    const fullPath = `${path}.${sourcePath}`;
    checkOneOf(source, fullPath, ['configMapRef', 'secretRef'], problems);
    const prefix = stringAt(source, 'prefix');
    if (prefix !== undefined && prefix !== '' && !ENV_NAME.test(prefix)) {
      problems.add(`${fullPath}.prefix`, `"${prefix}" must be letters, digits, '_', '-' or '.', not starting with a digit`);
    }
    for (const reference of ['configMapRef', 'secretRef'] as const) {
      const target = own(source, reference);
      if (isJsonObject(target)) checkObjectName(target, `${fullPath}.${reference}`, problems);
    }
  });
}

/** The `name` of a referenced ConfigMap or Secret: required, a DNS-1123 subdomain. */
function checkObjectName(reference: JsonObject, path: string, problems: ProblemList): void {
  const name = own(reference, 'name');
  if (isUnset(name)) problems.add(`${path}.name`, 'required');
  else if (typeof name === 'string' && (name.length > 253 || !DNS1123_SUBDOMAIN.test(name))) {
    problems.add(`${path}.name`, `"${name}" must be a DNS-1123 subdomain`);
  }
}

/** A downward API `fieldRef`: env and volumes each support their own set of fields, labels and annotations by key. */
export function checkFieldRef(fieldRef: unknown, path: string, supported: ReadonlySet<string>, problems: ProblemList): void {
  if (!isJsonObject(fieldRef)) return;
  const apiVersion = own(fieldRef, 'apiVersion');
  if (typeof apiVersion === 'string' && apiVersion !== '' && apiVersion !== 'v1') problems.add(`${path}.apiVersion`, `must be v1, got "${apiVersion}"`);
  const fieldPath = own(fieldRef, 'fieldPath');
  if (isUnset(fieldPath)) {
    problems.add(`${path}.fieldPath`, 'required');
    return;
  }
  if (typeof fieldPath !== 'string' || supported.has(fieldPath)) return;
  const subscript = /^metadata\.(labels|annotations)\['(.*)'\]$/.exec(fieldPath);
  if (subscript === null) {
    problems.add(`${path}.fieldPath`, `"${fieldPath}" is not supported here (supported: ${[...supported].join(', ')}, metadata.labels['KEY'], metadata.annotations['KEY'])`);
  } else if (!QUALIFIED_NAME.test(subscript[2] ?? '')) {
    problems.add(`${path}.fieldPath`, `"${subscript[2] ?? ''}" is not a valid ${subscript[1] === 'labels' ? 'label' : 'annotation'} key`);
  }
}

/** A downward API `resourceFieldRef`; in a volume it must name its container. */
export function checkResourceFieldRef(reference: unknown, path: string, inVolume: boolean, problems: ProblemList): void {
  if (!isJsonObject(reference)) return;
  if (inVolume && (stringAt(reference, 'containerName') ?? '') === '') problems.add(`${path}.containerName`, 'required');
  const resource = own(reference, 'resource');
  if (isUnset(resource)) problems.add(`${path}.resource`, 'required');
  else if (typeof resource === 'string' && !RESOURCE_FIELDS.test(resource)) {
    problems.add(`${path}.resource`, `"${resource}" must be limits. or requests. of cpu, memory, ephemeral-storage or hugepages-<size>`);
  }
}
