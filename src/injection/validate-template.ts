import { isJsonObject, own, type JsonObject, type JsonValue } from './json.js';
import { compareQuantities, parseQuantity, quantityProblem } from './quantity.js';

/**
 * Checks a template as the API server would check the Pod it ends up in, and
 * returns every problem as `path: problem` (the caller prefixes the template
 * name). Field names follow core/v1 Container and Volume; an unknown field is a
 * problem because the API server silently prunes unknown fields in patches, so
 * a typo would otherwise vanish without a word.
 */
export function findTemplateProblems(template: JsonObject): string[] {
  const problems = new ProblemList();
  for (const key of Object.keys(template)) {
    if (!TEMPLATE_FIELDS.has(key)) {
      problems.add(key, `unknown field (a template may hold ${[...TEMPLATE_FIELDS].join(', ')})`);
    }
  }
  const nativeSidecar = own(template, 'nativeSidecar');
  if (nativeSidecar !== undefined && typeof nativeSidecar !== 'boolean') problems.add('nativeSidecar', 'must be true or false');

  const containerNames = new Map<string, string>();
  for (const list of ['containers', 'initContainers'] as const) {
    forEachEntry(template, list, problems, (container, path) => checkContainer(container, path, list, problems, containerNames));
  }
  const volumeNames = new Map<string, string>();
  forEachEntry(template, 'volumes', problems, (volume, path) => checkVolume(volume, path, problems, volumeNames));
  const secretNames = new Map<string, string>();
  forEachEntry(template, 'imagePullSecrets', problems, (secret, path) => {
    const name = checkName(secret, path, problems, DNS1123_SUBDOMAIN, 'a DNS-1123 subdomain');
    if (name !== undefined) checkUnique(name, path, secretNames, problems);
    checkKnownFields(secret, path, new Set(['name']), problems);
  });

  const entries = ['containers', 'initContainers', 'volumes', 'imagePullSecrets'].reduce((count, list) => {
    const value = own(template, list);
    return count + (Array.isArray(value) ? value.length : 0);
  }, 0);
  if (entries === 0 && problems.isEmpty()) problems.add('', 'adds nothing: give at least one of containers, initContainers, volumes, imagePullSecrets');
  return problems.list();
}

const TEMPLATE_FIELDS = new Set(['containers', 'initContainers', 'volumes', 'imagePullSecrets', 'nativeSidecar']);

/** core/v1 Container fields, up to Kubernetes 1.34. */
const CONTAINER_FIELDS = new Set([
  'name', 'image', 'command', 'args', 'workingDir', 'ports', 'envFrom', 'env', 'resources', 'resizePolicy',
  'restartPolicy', 'restartPolicyRules', 'volumeMounts', 'volumeDevices', 'livenessProbe', 'readinessProbe',
  'startupProbe', 'lifecycle', 'terminationMessagePath', 'terminationMessagePolicy', 'imagePullPolicy',
  'securityContext', 'stdin', 'stdinOnce', 'tty',
]);

/** core/v1 Volume sources, up to Kubernetes 1.34; a volume has exactly one. */
const VOLUME_SOURCES = new Set([
  'hostPath', 'emptyDir', 'gcePersistentDisk', 'awsElasticBlockStore', 'gitRepo', 'secret', 'nfs', 'iscsi',
  'glusterfs', 'persistentVolumeClaim', 'rbd', 'flexVolume', 'cinder', 'cephfs', 'flocker', 'downwardAPI', 'fc',
  'azureFile', 'configMap', 'vsphereVolume', 'quobyte', 'azureDisk', 'photonPersistentDisk', 'projected',
  'portworxVolume', 'scaleIO', 'storageos', 'csi', 'ephemeral', 'image',
]);

const PORT_FIELDS = new Set(['name', 'containerPort', 'hostPort', 'hostIP', 'protocol']);
const ENV_FIELDS = new Set(['name', 'value', 'valueFrom']);
const MOUNT_FIELDS = new Set([
  'name', 'mountPath', 'subPath', 'subPathExpr', 'readOnly', 'recursiveReadOnly', 'mountPropagation',
]);
const PROBE_HANDLERS = ['exec', 'httpGet', 'tcpSocket', 'grpc'] as const;

export const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
/** IANA_SVC_NAME: at most 15 characters, at least one letter, no `--`. */
const PORT_NAME = /^(?=.*[a-z])(?!.*--)[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

class ProblemList {
  readonly #problems: string[] = [];
  add(path: string, problem: string): void {
    this.#problems.push(path === '' ? problem : `${path}: ${problem}`);
  }
  isEmpty(): boolean {
    return this.#problems.length === 0;
  }
  list(): string[] {
    return [...this.#problems];
  }
}

function forEachEntry(
  parent: JsonObject,
  field: string,
  problems: ProblemList,
  check: (entry: JsonObject, path: string) => void,
): void {
  const value = own(parent, field);
  if (value === undefined || value === null) return;
  if (!Array.isArray(value)) {
    problems.add(field, 'must be a list');
    return;
  }
  value.forEach((entry, index) => {
    const path = `${field}[${index}]`;
    if (isJsonObject(entry)) check(entry, path);
    else problems.add(path, 'must be a mapping');
  });
}

function checkName(
  entry: JsonObject,
  path: string,
  problems: ProblemList,
  pattern: RegExp,
  patternName: string,
  maxLength = pattern === DNS1123_LABEL ? 63 : 253,
): string | undefined {
  const name = own(entry, 'name');
  if (name === undefined || name === null || name === '') {
    problems.add(`${path}.name`, 'required');
    return undefined;
  }
  if (typeof name !== 'string') {
    problems.add(`${path}.name`, 'must be a string');
    return undefined;
  }
  if (name.length > maxLength || !pattern.test(name)) {
    problems.add(`${path}.name`, `"${name}" must be ${patternName} (lowercase letters, digits and '-', at most ${maxLength} characters)`);
  }
  return name;
}

function checkUnique(name: string, path: string, seen: Map<string, string>, problems: ProblemList): void {
  const first = seen.get(name);
  if (first === undefined) seen.set(name, path);
  else problems.add(`${path}.name`, `"${name}" duplicates ${first}.name`);
}

function checkKnownFields(entry: JsonObject, path: string, known: ReadonlySet<string>, problems: ProblemList): void {
  for (const key of Object.keys(entry)) {
    if (!known.has(key)) problems.add(`${path}.${key}`, 'unknown field');
  }
}

function checkContainer(
  container: JsonObject,
  path: string,
  list: 'containers' | 'initContainers',
  problems: ProblemList,
  containerNames: Map<string, string>,
): void {
  const name = checkName(container, path, problems, DNS1123_LABEL, 'a DNS-1123 label');
  if (name !== undefined) checkUnique(name, path, containerNames, problems);
  checkKnownFields(container, path, CONTAINER_FIELDS, problems);

  const image = own(container, 'image');
  if (image === undefined || image === null || image === '') problems.add(`${path}.image`, 'required');
  else if (typeof image !== 'string' || image.trim() !== image || /\s/.test(image)) {
    problems.add(`${path}.image`, 'must be an image reference without spaces');
  }

  for (const field of ['command', 'args'] as const) {
    const value = own(container, field);
    if (value !== undefined && (!Array.isArray(value) || value.some((item) => typeof item !== 'string'))) {
      problems.add(`${path}.${field}`, 'must be a list of strings');
    }
  }
  checkEnum(container, 'imagePullPolicy', ['Always', 'IfNotPresent', 'Never'], path, problems);
  checkEnum(container, 'terminationMessagePolicy', ['File', 'FallbackToLogsOnError'], path, problems);
  const restartPolicy = own(container, 'restartPolicy');
  if (restartPolicy !== undefined) {
    if (list === 'containers') problems.add(`${path}.restartPolicy`, 'only init containers may set restartPolicy (use nativeSidecar for a native sidecar)');
    else checkEnum(container, 'restartPolicy', ['Always'], path, problems);
  }

  const portNames = new Map<string, string>();
  forEachEntry(container, 'ports', problems, (port, portPath) => {
    const fullPath = `${path}.${portPath}`;
    checkKnownFields(port, fullPath, PORT_FIELDS, problems);
    checkPortNumber(own(port, 'containerPort'), `${fullPath}.containerPort`, true, problems);
    checkPortNumber(own(port, 'hostPort'), `${fullPath}.hostPort`, false, problems);
    checkEnum(port, 'protocol', ['TCP', 'UDP', 'SCTP'], fullPath, problems);
    const portName = own(port, 'name');
    if (portName !== undefined) {
      if (typeof portName !== 'string' || portName.length > 15 || !PORT_NAME.test(portName)) {
        problems.add(`${fullPath}.name`, `"${String(portName)}" must be an IANA service name (at most 15 lowercase letters, digits and '-', with a letter)`);
      } else checkUnique(portName, fullPath, portNames, problems);
    }
  });

  const envNames = new Map<string, string>();
  forEachEntry(container, 'env', problems, (variable, envPath) => {
    const fullPath = `${path}.${envPath}`;
    checkKnownFields(variable, fullPath, ENV_FIELDS, problems);
    const envName = own(variable, 'name');
    if (typeof envName !== 'string' || envName === '') problems.add(`${fullPath}.name`, 'required');
    else if (envName.includes('=')) problems.add(`${fullPath}.name`, `"${envName}" must not contain '='`);
    else checkUnique(envName, fullPath, envNames, problems);
    const value = own(variable, 'value');
    if (value !== undefined && typeof value !== 'string') problems.add(`${fullPath}.value`, 'must be a string (quote numbers and booleans)');
    if (value !== undefined && own(variable, 'valueFrom') !== undefined) problems.add(fullPath, 'may not have both value and valueFrom');
  });

  const mountPaths = new Map<string, string>();
  forEachEntry(container, 'volumeMounts', problems, (mount, mountPath) => {
    const fullPath = `${path}.${mountPath}`;
    checkKnownFields(mount, fullPath, MOUNT_FIELDS, problems);
    if (typeof own(mount, 'name') !== 'string' || own(mount, 'name') === '') problems.add(`${fullPath}.name`, 'required');
    const target = own(mount, 'mountPath');
    if (typeof target !== 'string' || target === '') problems.add(`${fullPath}.mountPath`, 'required');
    else {
      const first = mountPaths.get(target);
      if (first === undefined) mountPaths.set(target, fullPath);
      else problems.add(`${fullPath}.mountPath`, `"${target}" is already mounted by ${first}`);
    }
  });

  checkResources(own(container, 'resources'), `${path}.resources`, problems);
  for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe'] as const) {
    checkProbe(own(container, probe), `${path}.${probe}`, problems);
  }
  for (const field of ['securityContext', 'lifecycle'] as const) {
    const value = own(container, field);
    if (value !== undefined && value !== null && !isJsonObject(value)) problems.add(`${path}.${field}`, 'must be a mapping');
  }
}

function checkPortNumber(value: JsonValue | undefined, path: string, required: boolean, problems: ProblemList): void {
  if (value === undefined || value === null) {
    if (required) problems.add(path, 'required');
    return;
  }
  if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > 65535) {
    problems.add(path, 'must be 1-65535');
  }
}

function checkEnum(entry: JsonObject, field: string, allowed: readonly string[], path: string, problems: ProblemList): void {
  const value = own(entry, field);
  if (value !== undefined && (typeof value !== 'string' || !allowed.includes(value))) {
    problems.add(`${path}.${field}`, `must be one of ${allowed.join(', ')}`);
  }
}

function checkResources(resources: JsonValue | undefined, path: string, problems: ProblemList): void {
  if (resources === undefined || resources === null) return;
  if (!isJsonObject(resources)) {
    problems.add(path, 'must be a mapping');
    return;
  }
  for (const key of Object.keys(resources)) {
    if (key !== 'limits' && key !== 'requests' && key !== 'claims') problems.add(`${path}.${key}`, 'unknown field');
  }
  const parsed: Record<'limits' | 'requests', Map<string, ReturnType<typeof parseQuantity>>> = {
    limits: new Map(),
    requests: new Map(),
  };
  for (const kind of ['limits', 'requests'] as const) {
    const amounts = own(resources, kind);
    if (amounts === undefined || amounts === null) continue;
    if (!isJsonObject(amounts)) {
      problems.add(`${path}.${kind}`, 'must be a mapping of resource name to quantity');
      continue;
    }
    for (const [resource, amount] of Object.entries(amounts)) {
      const problem = quantityProblem(amount);
      if (problem !== undefined) problems.add(`${path}.${kind}.${resource}`, problem);
      else if (typeof amount === 'string' || typeof amount === 'number') parsed[kind].set(resource, parseQuantity(amount));
    }
  }
  for (const [resource, request] of parsed.requests) {
    const limit = parsed.limits.get(resource);
    if (request !== undefined && limit !== undefined && compareQuantities(request, limit) > 0) {
      problems.add(`${path}.requests.${resource}`, `must be less than or equal to the limit`);
    }
  }
}

function checkProbe(probe: JsonValue | undefined, path: string, problems: ProblemList): void {
  if (probe === undefined || probe === null) return;
  if (!isJsonObject(probe)) {
    problems.add(path, 'must be a mapping');
    return;
  }
  const handlers = PROBE_HANDLERS.filter((handler) => own(probe, handler) !== undefined);
  if (handlers.length !== 1) problems.add(path, `must have exactly one of ${PROBE_HANDLERS.join(', ')}`);
  for (const handler of ['httpGet', 'tcpSocket', 'grpc'] as const) {
    const action = own(probe, handler);
    if (isJsonObject(action)) {
      const port = own(action, 'port');
      const named = typeof port === 'string' && handler !== 'grpc' && PORT_NAME.test(port);
      if (!named) checkPortNumber(port, `${path}.${handler}.port`, true, problems);
    }
  }
}

function checkVolume(volume: JsonObject, path: string, problems: ProblemList, volumeNames: Map<string, string>): void {
  const name = checkName(volume, path, problems, DNS1123_LABEL, 'a DNS-1123 label');
  if (name !== undefined) checkUnique(name, path, volumeNames, problems);
  const sources: string[] = [];
  for (const key of Object.keys(volume)) {
    if (key === 'name') continue;
    if (!VOLUME_SOURCES.has(key)) problems.add(`${path}.${key}`, 'unknown field (not a volume source)');
    else {
      sources.push(key);
      const source = own(volume, key);
      if (!isJsonObject(source)) problems.add(`${path}.${key}`, 'must be a mapping (write {} for the defaults)');
    }
  }
  if (sources.length === 0) problems.add(path, 'must have exactly one volume source (configMap, secret, emptyDir, ...)');
  if (sources.length > 1) problems.add(path, `must have exactly one volume source, found ${sources.join(', ')}`);
}
