import { arrayAt, isJsonObject, own, stringAt, type JsonObject, type JsonValue } from '../basics/index.js';
import { checkFieldRef, checkResourceFieldRef, VOLUME_FIELD_PATHS } from './validate-env.js';
import { checkEnum, checkName, checkOneOf, checkUnique, DNS1123_LABEL, forEachNested, isUnset, relativePathProblem, type ProblemList } from './entry-checks.js';

/** core/v1 Volume sources, up to Kubernetes 1.34; a volume has at most one. */
const VOLUME_SOURCES: ReadonlySet<string> = new Set([
  'hostPath', 'emptyDir', 'gcePersistentDisk', 'awsElasticBlockStore', 'gitRepo', 'secret', 'nfs', 'iscsi',
  'glusterfs', 'persistentVolumeClaim', 'rbd', 'flexVolume', 'cinder', 'cephfs', 'flocker', 'downwardAPI', 'fc',
  'azureFile', 'configMap', 'vsphereVolume', 'quobyte', 'azureDisk', 'photonPersistentDisk', 'projected',
  'portworxVolume', 'scaleIO', 'storageos', 'csi', 'ephemeral', 'image',
]);

const MAX_MODE = 0o777;

/** A volume as the API server's ValidateVolumes sees it, for the sources a sidecar uses; types are the schema check's. */
export function checkVolume(volume: JsonObject, path: string, problems: ProblemList, volumeNames: Map<string, string>): void {
  const name = checkName(volume, path, problems, DNS1123_LABEL, 'a DNS-1123 label');
  if (name !== undefined) checkUnique(name, path, volumeNames, problems);
  // No source at all is fine: the API server defaults such a volume to an emptyDir.
  const sources = Object.keys(volume).filter((key) => VOLUME_SOURCES.has(key) && own(volume, key) !== null);
  if (sources.length > 1) problems.add(path, `may not have more than one volume source, found ${sources.join(', ')}`);

  const configMap = own(volume, 'configMap');
  if (isJsonObject(configMap)) {
    requireString(configMap, 'name', `${path}.configMap`, problems);
    checkKeyProjection(configMap, `${path}.configMap`, problems);
  }
  const secret = own(volume, 'secret');
  if (isJsonObject(secret)) {
    requireString(secret, 'secretName', `${path}.secret`, problems);
    checkKeyProjection(secret, `${path}.secret`, problems);
  }
  const downwardAPI = own(volume, 'downwardAPI');
  if (isJsonObject(downwardAPI)) checkDownwardApi(downwardAPI, `${path}.downwardAPI`, problems);
  const projected = own(volume, 'projected');
  if (isJsonObject(projected)) checkProjected(projected, `${path}.projected`, problems);
  const hostPath = own(volume, 'hostPath');
  if (isJsonObject(hostPath)) {
    requireString(hostPath, 'path', `${path}.hostPath`, problems);
    const hostDirectory = stringAt(hostPath, 'path');
    if (hostDirectory?.split('/').includes('..') === true) problems.add(`${path}.hostPath.path`, `"${hostDirectory}" must not contain '..'`);
    checkEnum(hostPath, 'type', ['', 'DirectoryOrCreate', 'Directory', 'FileOrCreate', 'File', 'Socket', 'CharDevice', 'BlockDevice'], `${path}.hostPath`, problems);
  }
  const nfs = own(volume, 'nfs');
  if (isJsonObject(nfs)) {
    requireString(nfs, 'server', `${path}.nfs`, problems);
    requireString(nfs, 'path', `${path}.nfs`, problems);
  }
  const ephemeral = own(volume, 'ephemeral');
  if (isJsonObject(ephemeral) && !isJsonObject(own(ephemeral, 'volumeClaimTemplate'))) problems.add(`${path}.ephemeral.volumeClaimTemplate`, 'required');
  const claim = own(volume, 'persistentVolumeClaim');
  if (isJsonObject(claim)) requireString(claim, 'claimName', `${path}.persistentVolumeClaim`, problems);
  const csi = own(volume, 'csi');
  if (isJsonObject(csi)) requireString(csi, 'driver', `${path}.csi`, problems);
}

function requireString(entry: JsonObject, field: string, path: string, problems: ProblemList): void {
  const value = own(entry, field);
  if (isUnset(value)) problems.add(`${path}.${field}`, 'required');
}

function checkMode(value: JsonValue | undefined, path: string, problems: ProblemList): void {
  if (typeof value === 'number' && (value < 0 || value > MAX_MODE)) {
    problems.add(path, `must be a file mode between 0 and 0777 (octal), got ${value} (write 0644 for rw-r--r--, or 420 in decimal)`);
  }
}

/** configMap and secret: defaultMode, and items of key, relative path and mode. */
function checkKeyProjection(source: JsonObject, path: string, problems: ProblemList): void {
  checkMode(own(source, 'defaultMode'), `${path}.defaultMode`, problems);
  checkItems(source, path, problems, (item, itemPath) => requireString(item, 'key', itemPath, problems));
}

function checkItems(source: JsonObject, path: string, problems: ProblemList, checkItem: (item: JsonObject, itemPath: string) => void): void {
  forEachNested(source, 'items', (item, itemPath) => {
    const fullPath = `${path}.${itemPath}`;
    checkItem(item, fullPath);
    const target = own(item, 'path');
    if (isUnset(target)) problems.add(`${fullPath}.path`, 'required');
    else if (typeof target === 'string') {
      const problem = relativePathProblem(target);
      if (problem !== undefined) problems.add(`${fullPath}.path`, problem);
    }
    checkMode(own(item, 'mode'), `${fullPath}.mode`, problems);
  });
}

function checkDownwardApi(source: JsonObject, path: string, problems: ProblemList): void {
  checkMode(own(source, 'defaultMode'), `${path}.defaultMode`, problems);
  checkDownwardApiItems(source, path, problems);
}

function checkDownwardApiItems(source: JsonObject, path: string, problems: ProblemList): void {
  checkItems(source, path, problems, (item, itemPath) => {
    checkOneOf(item, itemPath, ['fieldRef', 'resourceFieldRef'], problems);
    checkFieldRef(own(item, 'fieldRef'), `${itemPath}.fieldRef`, VOLUME_FIELD_PATHS, problems);
    checkResourceFieldRef(own(item, 'resourceFieldRef'), `${itemPath}.resourceFieldRef`, true, problems);
  });
}

const PROJECTIONS = ['secret', 'configMap', 'downwardAPI', 'serviceAccountToken', 'clusterTrustBundle', 'podCertificate'] as const;

/** A projected volume: at most one kind per source, and no file path twice across its sources. */
function checkProjected(source: JsonObject, path: string, problems: ProblemList): void {
  checkMode(own(source, 'defaultMode'), `${path}.defaultMode`, problems);
  const filePaths = new Map<string, string>();
  const claimPath = (filePath: unknown, where: string): void => {
    if (typeof filePath !== 'string' || filePath === '') return;
    const first = filePaths.get(filePath);
    if (first === undefined) filePaths.set(filePath, where);
    else problems.add(where, `"${filePath}" is already projected by ${first}`);
  };
  forEachNested(source, 'sources', (projection, projectionPath) => {
    const fullPath = `${path}.${projectionPath}`;
    const kinds = PROJECTIONS.filter((kind) => own(projection, kind) !== undefined && own(projection, kind) !== null);
    if (kinds.length > 1) problems.add(fullPath, `may not have more than one of ${PROJECTIONS.join(', ')}, found ${kinds.join(', ')}`);
    for (const kind of ['secret', 'configMap', 'downwardAPI'] as const) {
      const files = own(projection, kind);
      if (!isJsonObject(files)) continue;
      if (kind === 'downwardAPI') checkDownwardApiItems(files, `${fullPath}.${kind}`, problems);
      else checkItems(files, `${fullPath}.${kind}`, problems, (item, itemPath) => requireString(item, 'key', itemPath, problems));
      (arrayAt(files, 'items') ?? []).forEach((item, index) => claimPath(isJsonObject(item) ? own(item, 'path') : undefined, `${fullPath}.${kind}.items[${index}].path`));
    }
    const token = own(projection, 'serviceAccountToken');
    if (isJsonObject(token)) {
      const tokenPath = `${fullPath}.serviceAccountToken`;
      requireString(token, 'path', tokenPath, problems);
      const file = stringAt(token, 'path');
      // Kubernetes 1.28 did not check this path yet; later versions do.
      const problem = file === undefined || file === '' ? undefined : relativePathProblem(file);
      if (problem !== undefined) problems.add(`${tokenPath}.path`, problem);
      claimPath(file, `${tokenPath}.path`);
      const expiration = own(token, 'expirationSeconds');
      if (typeof expiration === 'number' && expiration < 600) problems.add(`${tokenPath}.expirationSeconds`, 'must be at least 600 (10 minutes)');
    }
  });
}
