import { findTypeProblems } from './check-field-types.js';
import { arrayAt, isJsonObject, own, stringAt, type JsonObject, type JsonValue } from '../basics/index.js';
import { checkEnum, checkName, checkOneOf, checkUnique, DNS1123_LABEL, forEachEntry, forEachNested, isNonNegativeInteger, isUnset, PORT_NAME, ProblemList, relativePathProblem } from './entry-checks.js';
import { checkEnv } from './validate-env.js';
import { checkResources } from './validate-resources.js';
import { checkVolume } from './validate-volume.js';

/**
 * Checks a template as the API server would check the Pod it ends up in, and
 * returns every problem as `path: problem` (the caller prefixes the template
 * name). Field types and names come from the Pod's OpenAPI schema
 * (check-field-types.ts); an unknown field is a problem because the API server
 * silently prunes unknown fields in patches, so a typo would otherwise vanish
 * without a word. The rest follows the API server's validation of the Pod
 * (k8s.io/kubernetes pkg/apis/core/validation) for what a template can hold.
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
  const safeToEvict = own(template, 'safeToEvictLocalVolumes');
  if (safeToEvict !== undefined && typeof safeToEvict !== 'boolean') problems.add('safeToEvictLocalVolumes', 'must be true or false');

  const volumeNames = new Map<string, string>();
  forEachEntry(template, 'volumes', problems, (volume, path) => {
    problems.addAll(findTypeProblems(volume, 'Volume', path));
    checkVolume(volume, path, problems, volumeNames);
  });
  const volumes = new Map((arrayAt(template, 'volumes') ?? []).filter(isJsonObject).map((volume) => [stringAt(volume, 'name') ?? '', volume]));
  const containerNames = new Map<string, string>();
  for (const list of ['containers', 'initContainers'] as const) {
    const hostPorts = new Map<string, string>();
    forEachEntry(template, list, problems, (container, path) => {
      problems.addAll(findTypeProblems(container, 'Container', path));
      checkContainer(container, path, list, problems, containerNames);
      checkPorts(container, path, hostPorts, problems);
      checkMountedVolumes(container, path, volumes, problems);
    });
  }
  // The API server takes any name here, even none or twice; a merge by name needs one, once.
  const secretNames = new Map<string, string>();
  forEachEntry(template, 'imagePullSecrets', problems, (secret, path) => {
    problems.addAll(findTypeProblems(secret, 'LocalObjectReference', path));
    const name = stringAt(secret, 'name');
    if (name === undefined || name === '') problems.add(`${path}.name`, 'required');
    else checkUnique(name, path, secretNames, problems);
  });

  const entries = ['containers', 'initContainers', 'volumes', 'imagePullSecrets'].reduce((count, list) => {
    const value = own(template, list);
    return count + (Array.isArray(value) ? value.length : 0);
  }, 0);
  if (entries === 0 && problems.isEmpty()) problems.add('', 'adds nothing: give at least one of containers, initContainers, volumes, imagePullSecrets');
  return problems.list();
}

// `capture` is read and checked by capture-template.ts, `proxyLifecycle` by lifecycle-template.ts.
const TEMPLATE_FIELDS = new Set(['containers', 'initContainers', 'volumes', 'imagePullSecrets', 'nativeSidecar', 'capture', 'proxyLifecycle', 'safeToEvictLocalVolumes']);

function checkContainer(
  container: JsonObject,
  path: string,
  list: 'containers' | 'initContainers',
  problems: ProblemList,
  containerNames: Map<string, string>,
): void {
  const name = checkName(container, path, problems, DNS1123_LABEL, 'a DNS-1123 label');
  if (name !== undefined) checkUnique(name, path, containerNames, problems);

  const image = own(container, 'image');
  if (isUnset(image)) problems.add(`${path}.image`, 'required');
  else if (typeof image === 'string' && image.trim() !== image) problems.add(`${path}.image`, 'must not have leading or trailing whitespace');

  checkEnum(container, 'imagePullPolicy', ['Always', 'IfNotPresent', 'Never'], path, problems);
  checkEnum(container, 'terminationMessagePolicy', ['File', 'FallbackToLogsOnError'], path, problems);
  const restartPolicy = own(container, 'restartPolicy');
  if (restartPolicy !== undefined && restartPolicy !== null) {
    if (list === 'containers') problems.add(`${path}.restartPolicy`, 'only init containers may set restartPolicy (use nativeSidecar for a native sidecar)');
    else checkEnum(container, 'restartPolicy', ['Always'], path, problems);
  }
  // A classic init container runs to completion before the app: the API server forbids probes and hooks on it.
  if (list === 'initContainers' && restartPolicy !== 'Always') {
    for (const field of ['livenessProbe', 'readinessProbe', 'startupProbe', 'lifecycle']) {
      const value = own(container, field);
      if (value !== undefined && value !== null) {
        problems.add(`${path}.${field}`, 'may not be set on an init container without restartPolicy: Always (only native sidecars have probes and lifecycle hooks)');
      }
    }
  }

  checkEnv(container, path, problems);
  checkVolumeMounts(container, path, problems);
  checkResources(own(container, 'resources'), `${path}.resources`, problems);
  for (const probe of ['livenessProbe', 'readinessProbe', 'startupProbe'] as const) {
    checkProbe(own(container, probe), `${path}.${probe}`, probe !== 'readinessProbe', problems);
  }
  const lifecycle = own(container, 'lifecycle');
  if (isJsonObject(lifecycle)) {
    for (const hook of ['postStart', 'preStop'] as const) {
      const handler = own(lifecycle, hook);
      if (isJsonObject(handler)) checkHandlers(handler, `${path}.lifecycle.${hook}`, LIFECYCLE_HANDLERS, problems);
    }
  }
  checkSecurityContext(own(container, 'securityContext'), `${path}.securityContext`, problems);
}

/** `hostPorts`: protocol/hostIP/hostPort of the list's containers so far, each unique on a node. */
function checkPorts(container: JsonObject, path: string, hostPorts: Map<string, string>, problems: ProblemList): void {
  const portNames = new Map<string, string>();
  forEachNested(container, 'ports', (port, portPath) => {
    const fullPath = `${path}.${portPath}`;
    checkPortNumber(own(port, 'containerPort'), `${fullPath}.containerPort`, true, problems);
    const hostPort = own(port, 'hostPort');
    // 0 is the API server's "no host port".
    if (hostPort !== 0) checkPortNumber(hostPort, `${fullPath}.hostPort`, false, problems);
    if (typeof hostPort === 'number' && hostPort > 0) {
      const key = `${stringAt(port, 'protocol') ?? 'TCP'}/${stringAt(port, 'hostIP') ?? ''}/${hostPort}`;
      const first = hostPorts.get(key);
      if (first === undefined) hostPorts.set(key, `${fullPath}.hostPort`);
      else problems.add(`${fullPath}.hostPort`, `${key} is already used by ${first}`);
    }
    checkEnum(port, 'protocol', ['TCP', 'UDP', 'SCTP'], fullPath, problems);
    const portName = own(port, 'name');
    if (typeof portName === 'string') {
      if (portName.length > 15 || !PORT_NAME.test(portName)) {
        problems.add(`${fullPath}.name`, `"${portName}" must be an IANA service name (at most 15 lowercase letters, digits and '-', with a letter)`);
      } else checkUnique(portName, fullPath, portNames, problems);
    }
  });
}

function checkVolumeMounts(container: JsonObject, path: string, problems: ProblemList): void {
  const mountPaths = new Map<string, string>();
  forEachNested(container, 'volumeMounts', (mount, mountPath) => {
    const fullPath = `${path}.${mountPath}`;
    const name = own(mount, 'name');
    if (isUnset(name)) problems.add(`${fullPath}.name`, 'required');
    const target = own(mount, 'mountPath');
    if (isUnset(target)) problems.add(`${fullPath}.mountPath`, 'required');
    else if (typeof target === 'string') {
      const first = mountPaths.get(target);
      if (first === undefined) mountPaths.set(target, fullPath);
      else problems.add(`${fullPath}.mountPath`, `"${target}" is already mounted by ${first}`);
    }
    const subPath = stringAt(mount, 'subPath');
    const subPathExpr = stringAt(mount, 'subPathExpr');
    if (subPath !== undefined && subPath !== '' && subPathExpr !== undefined && subPathExpr !== '') {
      problems.add(fullPath, 'subPath and subPathExpr are mutually exclusive');
    }
    for (const [field, value] of [['subPath', subPath], ['subPathExpr', subPathExpr]] as const) {
      if (value !== undefined && value !== '') {
        const problem = relativePathProblem(value);
        if (problem !== undefined) problems.add(`${fullPath}.${field}`, problem);
      }
    }
    checkEnum(mount, 'mountPropagation', ['None', 'HostToContainer', 'Bidirectional'], fullPath, problems);
    const securityContext = own(container, 'securityContext');
    if (own(mount, 'mountPropagation') === 'Bidirectional' && !(isJsonObject(securityContext) && own(securityContext, 'privileged') === true)) {
      problems.add(`${fullPath}.mountPropagation`, 'Bidirectional is only for privileged containers');
    }
  });
}

/**
 * Every mount and device must name a volume of the template: a Pod has no
 * volume the template could rely on (the service account's has a random name).
 * A device (block mode) needs a persistentVolumeClaim or ephemeral volume.
 */
function checkMountedVolumes(container: JsonObject, path: string, volumes: ReadonlyMap<string, JsonObject>, problems: ProblemList): void {
  for (const field of ['volumeMounts', 'volumeDevices']) {
    const entries = own(container, field);
    if (!Array.isArray(entries)) continue;
    entries.forEach((entry, index) => {
      const name = isJsonObject(entry) ? own(entry, 'name') : undefined;
      if (typeof name !== 'string' || name === '') return;
      const volume = volumes.get(name);
      if (volume === undefined) problems.add(`${path}.${field}[${index}].name`, `"${name}" names no volume of the template (add it to volumes)`);
      else if (field === 'volumeDevices' && !isJsonObject(own(volume, 'persistentVolumeClaim')) && !isJsonObject(own(volume, 'ephemeral'))) {
        problems.add(`${path}.${field}[${index}].name`, `"${name}" must be a persistentVolumeClaim or ephemeral volume for a block device`);
      }
    });
  }
}

function checkPortNumber(value: JsonValue | undefined, path: string, required: boolean, problems: ProblemList): void {
  if (value === undefined || value === null) {
    if (required) problems.add(path, 'required');
    return;
  }
  // Other types are the schema check's to report.
  if (typeof value === 'number' && (!Number.isInteger(value) || value < 1 || value > 65535)) problems.add(path, 'must be 1-65535');
}

const PROBE_HANDLERS = ['exec', 'httpGet', 'tcpSocket', 'grpc'] as const;
const LIFECYCLE_HANDLERS = ['exec', 'httpGet', 'tcpSocket', 'sleep'] as const;

/** Exactly one of `handlers` set, and each port a number 1-65535 or (but for grpc) a port name. */
function checkHandlers(entry: JsonObject, path: string, handlers: readonly string[], problems: ProblemList): void {
  checkOneOf(entry, path, handlers, problems);
  for (const handler of ['httpGet', 'tcpSocket', 'grpc']) {
    const action = own(entry, handler);
    if (!isJsonObject(action)) continue;
    const port = own(action, 'port');
    if (typeof port === 'string' && handler !== 'grpc') {
      if (!PORT_NAME.test(port) || port.length > 15) problems.add(`${path}.${handler}.port`, `"${port}" must be a port number or an IANA service name`);
    } else checkPortNumber(port, `${path}.${handler}.port`, true, problems);
  }
  const httpGet = own(entry, 'httpGet');
  if (isJsonObject(httpGet)) {
    checkEnum(httpGet, 'scheme', ['HTTP', 'HTTPS'], `${path}.httpGet`, problems);
    forEachNested(httpGet, 'httpHeaders', (header, headerPath) => {
      const name = own(header, 'name');
      if (typeof name === 'string' && !/^[-A-Za-z0-9]+$/.test(name)) problems.add(`${path}.httpGet.${headerPath}.name`, `"${name}" must be letters, digits and '-'`);
    });
  }
  const exec = own(entry, 'exec');
  if (isJsonObject(exec)) {
    const command = own(exec, 'command');
    if (!Array.isArray(command) || command.length === 0) problems.add(`${path}.exec.command`, 'required');
  }
}

/** `oneSuccess`: liveness and startup probes, whose successThreshold the API server fixes at 1. */
function checkProbe(probe: JsonValue | undefined, path: string, oneSuccess: boolean, problems: ProblemList): void {
  if (!isJsonObject(probe)) return;
  checkHandlers(probe, path, PROBE_HANDLERS, problems);
  for (const field of ['initialDelaySeconds', 'timeoutSeconds', 'periodSeconds', 'successThreshold', 'failureThreshold']) {
    const value = own(probe, field);
    if (typeof value === 'number' && !isNonNegativeInteger(value)) problems.add(`${path}.${field}`, 'must be greater than or equal to 0');
  }
  const successThreshold = own(probe, 'successThreshold');
  if (oneSuccess && typeof successThreshold === 'number' && successThreshold !== 1) problems.add(`${path}.successThreshold`, 'must be 1');
  const grace = own(probe, 'terminationGracePeriodSeconds');
  if (typeof grace === 'number' && grace <= 0) problems.add(`${path}.terminationGracePeriodSeconds`, 'must be greater than 0');
}

const MAX_ID = 2147483647;

function checkSecurityContext(context: JsonValue | undefined, path: string, problems: ProblemList): void {
  if (!isJsonObject(context)) return;
  for (const field of ['runAsUser', 'runAsGroup']) {
    const id = own(context, field);
    if (typeof id === 'number' && (id < 0 || id > MAX_ID)) problems.add(`${path}.${field}`, `must be between 0 and ${MAX_ID}`);
  }
  if (own(context, 'allowPrivilegeEscalation') === false) {
    if (own(context, 'privileged') === true) problems.add(path, 'cannot set allowPrivilegeEscalation to false and privileged to true');
    const capabilities = own(context, 'capabilities');
    const added = isJsonObject(capabilities) ? own(capabilities, 'add') : undefined;
    if (Array.isArray(added) && added.includes('CAP_SYS_ADMIN')) {
      problems.add(path, 'cannot set allowPrivilegeEscalation to false and capabilities.add CAP_SYS_ADMIN');
    }
  }
  checkEnum(context, 'procMount', ['Default', 'Unmasked'], path, problems);
  // Unmasked needs the Pod's hostUsers: false, which a template cannot set (1.28 did not check it yet).
  if (own(context, 'procMount') === 'Unmasked') problems.add(`${path}.procMount`, 'Unmasked needs the Pod to set hostUsers: false, which a template cannot');
  const seccomp = own(context, 'seccompProfile');
  if (isJsonObject(seccomp)) {
    const type = own(seccomp, 'type');
    if (isUnset(type)) problems.add(`${path}.seccompProfile.type`, 'required');
    checkEnum(seccomp, 'type', ['RuntimeDefault', 'Localhost', 'Unconfined'], `${path}.seccompProfile`, problems);
    const profile = own(seccomp, 'localhostProfile');
    const hasProfile = profile !== undefined && profile !== null && profile !== '';
    if (type === 'Localhost' && !hasProfile) problems.add(`${path}.seccompProfile.localhostProfile`, 'required when type is Localhost');
    if (type !== 'Localhost' && profile !== undefined && profile !== null) problems.add(`${path}.seccompProfile.localhostProfile`, 'may only be set when type is Localhost');
  }
}
