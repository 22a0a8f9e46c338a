import { createHash } from 'node:crypto';
import { TemplateError } from '../../errors.js';
import { CAPTURE_CHECK_NAME, CAPTURE_INIT_NAME, CAPTURE_LOCK_VOLUME, CaptureModeSetting, parseCaptureSettings, type CaptureSettings } from './capture-template.js';
import { parseLifecycleSettings, type LifecycleSettings } from './lifecycle-template.js';
import { DEFAULT_TEMPLATE_NAME, entryName, isJsonObject, own, parseYaml, parseYamlDocuments, stringAt, YamlSyntaxError, type JsonObject, type JsonValue } from '../basics/index.js';
import { findTemplateProblems } from './validate-template.js';

/** One validated sidecar template: what gets merged into a Pod. Deeply frozen. */
export interface SidecarTemplate {
  readonly name: string;
  /** `sha256:` and 16 hex digits of the template's canonical JSON. */
  readonly hash: string;
  /**
   * The same of the template without the CPU and memory of its containers and
   * of capture's envoy-init: equal for two templates that differ only there,
   * so a Pod's proxy can be resized in place to the live one (issue 52).
   */
  readonly hashWithoutResources: string;
  readonly containers: readonly JsonObject[];
  readonly initContainers: readonly JsonObject[];
  readonly volumes: readonly JsonObject[];
  readonly imagePullSecrets: readonly JsonObject[];
  /** The template's own choice of native sidecars; undefined leaves it to the server. */
  readonly nativeSidecar: boolean | undefined;
  /** How the proxy takes over the Pod's traffic; undefined: this template cannot capture. */
  readonly capture: CaptureSettings | undefined;
  /** Holding the app and draining the proxy; undefined: the proxy's probes and hooks stay as written. */
  readonly proxyLifecycle: LifecycleSettings | undefined;
  /** Name the template's local volumes in cluster-autoscaler's safe-to-evict annotation (default true). */
  readonly safeToEvictLocalVolumes: boolean;
}

/** Every template of one ConfigMap; swapped as a whole, never piecemeal. */
export interface TemplateSet {
  readonly templates: ReadonlyMap<string, SidecarTemplate>;
  readonly defaultTemplate: SidecarTemplate;
}

/**
 * Parses a ConfigMap's `data`: key `config` is the default template, every
 * other key a named one. All problems of all keys are reported at once, and
 * any problem rejects the whole set (a half-valid update is not applied).
 */
export function parseTemplateData(data: Readonly<Record<string, unknown>>): TemplateSet {
  const problems: string[] = [];
  const templates = new Map<string, SidecarTemplate>();
  if (!Object.hasOwn(data, DEFAULT_TEMPLATE_NAME)) {
    problems.push(`${DEFAULT_TEMPLATE_NAME}: required (the default template)`);
  }
  for (const [name, text] of Object.entries(data)) {
    if (typeof text !== 'string') {
      problems.push(`${name}: must be a string of YAML`);
      continue;
    }
    const result = parseOneTemplate(name, text);
    if (Array.isArray(result)) problems.push(...result);
    else templates.set(name, result);
  }
  const defaultTemplate = templates.get(DEFAULT_TEMPLATE_NAME);
  if (problems.length > 0 || defaultTemplate === undefined) throw new TemplateError(problems);
  return { templates, defaultTemplate };
}

/**
 * Parses a template file for the CLI: either a ConfigMap manifest (its `data`)
 * or a bare template (a partial PodSpec), which becomes the default template.
 */
export function parseTemplateFile(text: string): TemplateSet {
  let documents: unknown[];
  try {
    documents = parseYamlDocuments(text);
  } catch (error) {
    throw new TemplateError([error instanceof YamlSyntaxError ? error.message : String(error)]);
  }
  const [document] = documents;
  if (documents.length !== 1 || !isJsonObject(document)) {
    throw new TemplateError(['a template file must hold one YAML document: a ConfigMap or a template mapping']);
  }
  if (stringAt(document, 'kind') === 'ConfigMap') {
    const data = own(document, 'data');
    if (!isJsonObject(data)) throw new TemplateError(['ConfigMap: data: required']);
    return parseTemplateData(data);
  }
  const template = buildTemplate(DEFAULT_TEMPLATE_NAME, document);
  if (Array.isArray(template)) throw new TemplateError(template);
  return { templates: new Map([[DEFAULT_TEMPLATE_NAME, template]]), defaultTemplate: template };
}

function parseOneTemplate(name: string, text: string): SidecarTemplate | string[] {
  let parsed: unknown;
  try {
    parsed = parseYaml(text);
  } catch (error) {
    return [`${name}: ${error instanceof YamlSyntaxError ? error.message : String(error)}`];
  }
  if (!isJsonObject(parsed)) {
    return [`${name}: must be a mapping with containers, initContainers, volumes or imagePullSecrets`];
  }
  return buildTemplate(name, parsed);
}

function buildTemplate(name: string, content: JsonObject): SidecarTemplate | string[] {
  const list = (field: string): JsonObject[] => {
    const value = own(content, field);
    return Array.isArray(value) ? value.filter(isJsonObject) : [];
  };
  const capture = parseCaptureSettings(own(content, 'capture'), list('containers')[0]);
  const proxyLifecycle = parseLifecycleSettings(own(content, 'proxyLifecycle'));
  const problems = [...findTemplateProblems(content), ...(Array.isArray(capture) ? capture : []), ...(Array.isArray(proxyLifecycle) ? proxyLifecycle : [])];
  // Capture adds these by name: a template's own of the same name would take their place.
  if (capture !== undefined && !Array.isArray(capture)) {
    // CNI mode adds its check instead (docs/design.md §11).
    const check = capture.mode === CaptureModeSetting.initContainer ? [] : ([['containers', CAPTURE_CHECK_NAME], ['initContainers', CAPTURE_CHECK_NAME]] as const);
    for (const [field, taken] of [['containers', CAPTURE_INIT_NAME], ['initContainers', CAPTURE_INIT_NAME], ['volumes', CAPTURE_LOCK_VOLUME], ...check] as const) {
      if (list(field).some((entry) => entryName(entry) === taken)) problems.push(`${field}: "${taken}" is the name traffic capture adds; rename it, or remove the capture section`);
    }
  }
  if (proxyLifecycle !== undefined && !Array.isArray(proxyLifecycle) && list('containers').length === 0) {
    problems.push("proxyLifecycle: needs a proxy, the template's first entry of containers");
  }
  if (problems.length > 0 || Array.isArray(capture) || Array.isArray(proxyLifecycle)) return problems.map((problem) => `${name}: ${problem}`);
  const nativeSidecar = own(content, 'nativeSidecar');
  const safeToEvict = own(content, 'safeToEvictLocalVolumes');
  return deepFreeze({
    name,
    hash: hashTemplate(content),
    hashWithoutResources: hashTemplate(withoutResources(content)),
    containers: list('containers'),
    initContainers: list('initContainers'),
    volumes: list('volumes'),
    imagePullSecrets: list('imagePullSecrets'),
    nativeSidecar: typeof nativeSidecar === 'boolean' ? nativeSidecar : undefined,
    capture,
    proxyLifecycle,
    safeToEvictLocalVolumes: safeToEvict !== false,
  });
}

function hashTemplate(content: JsonObject): string {
  return 'sha256:' + createHash('sha256').update(canonicalJson(content)).digest('hex').slice(0, 16);
}

/** The resources a Pod's containers are resized in place by (the API server's "only cpu and memory resources are mutable"). */
const RESIZABLE_RESOURCES: readonly string[] = ['cpu', 'memory'];

/** CONTENT without the cpu and memory of each container's, init container's and capture's `resources` (a copy). */
function withoutResources(content: JsonObject): JsonObject {
  const strip = (holder: JsonValue | undefined): JsonValue | undefined => {
    if (!isJsonObject(holder) || !isJsonObject(holder['resources'])) return holder;
    const resources: JsonObject = {};
    for (const [kind, amounts] of Object.entries(holder['resources'])) {
      const kept = isJsonObject(amounts) ? Object.entries(amounts).filter(([name]) => !RESIZABLE_RESOURCES.includes(name)) : undefined;
      // A list left empty is as good as none: `limits: {cpu: 1}` removed is no change of shape.
      if (kept === undefined) resources[kind] = amounts;
      else if (kept.length > 0) resources[kind] = Object.fromEntries(kept);
    }
    const { resources: _resources, ...rest } = holder;
    return Object.keys(resources).length === 0 ? rest : { ...rest, resources };
  };
  const stripped: JsonObject = { ...content };
  for (const list of ['containers', 'initContainers']) {
    const entries = content[list];
    if (Array.isArray(entries)) stripped[list] = entries.map((entry) => strip(entry) ?? null);
  }
  if (content['capture'] !== undefined) stripped['capture'] = strip(content['capture']) ?? null;
  return stripped;
}

/** JSON with sorted keys, so that key order and YAML layout do not change the hash. */
function canonicalJson(value: JsonValue): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const keys = Object.keys(value).sort();
    return `{${keys.map((key) => `${JSON.stringify(key)}:${canonicalJson(value[key] ?? null)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

function deepFreeze<T>(value: T): T {
  if (value !== null && typeof value === 'object' && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}
