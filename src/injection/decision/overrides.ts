import { compareQuantities, describeValue, imageProblem, objectAt, own, parseQuantity, quantityProblem, type JsonObject, type Quantity } from '../basics/index.js';

/** The per-Pod overrides of the proxy, by annotation suffix (`envoy-injector.io/<name>`). */
export const OverrideName = {
  image: 'proxy-image',
  cpu: 'proxy-cpu',
  memory: 'proxy-memory',
  cpuLimit: 'proxy-cpu-limit',
  memoryLimit: 'proxy-memory-limit',
} as const;
export type OverrideName = (typeof OverrideName)[keyof typeof OverrideName];

export const ALL_OVERRIDES: readonly OverrideName[] = Object.values(OverrideName);
/** A platform team decides who may swap the proxy: resources yes, image no, unless configured. */
export const DEFAULT_ALLOWED_OVERRIDES: readonly OverrideName[] = [OverrideName.cpu, OverrideName.memory, OverrideName.cpuLimit, OverrideName.memoryLimit];

/** Each override is the annotation `envoy-injector.io/<name>`. */
export const OVERRIDE_ANNOTATION_PREFIX = 'envoy-injector.io/';

/** Where each resource override lands in the container. */
export const RESOURCE_TARGETS = {
  [OverrideName.cpu]: { kind: 'requests', resource: 'cpu' },
  [OverrideName.memory]: { kind: 'requests', resource: 'memory' },
  [OverrideName.cpuLimit]: { kind: 'limits', resource: 'cpu' },
  [OverrideName.memoryLimit]: { kind: 'limits', resource: 'memory' },
} as const;

export interface AppliedOverride {
  readonly annotation: string;
  readonly value: string;
  /** What it changed in the proxy container, e.g. `resources.requests.cpu`. */
  readonly field: string;
  /** Whose annotation it is: the Pod's own, or its namespace's (a default for its Pods). */
  readonly source: 'pod' | 'namespace';
}

export interface ResolvedOverrides {
  readonly applied: readonly AppliedOverride[];
  readonly warnings: readonly string[];
  /** Applies the accepted overrides to the proxy container (a copy). */
  readonly apply: (proxy: JsonObject) => JsonObject;
}

/** A namespace's `envoy-injector.io/proxy-*` annotations: the defaults of its Pods. */
export interface NamespaceDefaults {
  readonly name: string;
  readonly annotations: Readonly<Record<string, string>> | undefined;
}

/**
 * Reads the proxy overrides: a Pod's own annotation wins, its namespace's of
 * the same name is the default, the template's value the last resort. Every
 * problem (not allowed, not a quantity, not an image reference, a request
 * above its limit) becomes a warning and the value is ignored, as if absent:
 * an override never blocks a Pod. The namespace's values are checked against
 * the template first, then the Pod's against what the namespace left.
 */
export function resolveOverrides(
  annotations: JsonObject | undefined,
  templateProxy: JsonObject | undefined,
  allowed: readonly OverrideName[],
  namespace?: NamespaceDefaults,
): ResolvedOverrides {
  const warnings: string[] = [];
  const resources = objectAt(templateProxy, 'resources');
  const fromNamespace = new Map<OverrideName, string>();
  if (namespace?.annotations !== undefined) {
    const where = ` (namespace "${namespace.name}")`;
    readLayer(namespace.annotations, allowed, where, () => "the Pods' own or the template's value applies", warnings, fromNamespace);
    dropConflicts(fromNamespace, (_name, kind, resource) => templateQuantity(resources, kind, resource), where, () => "the template's", warnings);
  }
  const namespaceKept = (name: OverrideName): string => (fromNamespace.has(name) ? `namespace "${namespace?.name ?? ''}"'s value` : "the template's value");
  const fromPod = new Map<OverrideName, string>();
  readLayer(annotations, allowed, '', (name) => `${namespaceKept(name)} was kept`, warnings, fromPod);
  dropConflicts(
    fromPod,
    (name, kind, resource) => fromNamespace.get(name) ?? templateQuantity(resources, kind, resource),
    '',
    (names) => (names.some((name) => fromNamespace.has(name)) ? `namespace "${namespace?.name ?? ''}"'s` : "the template's"),
    warnings,
  );

  const accepted = new Map<OverrideName, { value: string; source: 'pod' | 'namespace' }>();
  for (const name of ALL_OVERRIDES) {
    const pod = fromPod.get(name);
    const defaulted = fromNamespace.get(name);
    if (pod !== undefined) accepted.set(name, { value: pod, source: 'pod' });
    else if (defaulted !== undefined) accepted.set(name, { value: defaulted, source: 'namespace' });
  }
  const applied: AppliedOverride[] = [...accepted].map(([name, { value, source }]) => ({
    annotation: OVERRIDE_ANNOTATION_PREFIX + name,
    value,
    field: overrideField(name),
    source,
  }));
  return { applied, warnings, apply: (proxy) => applyOverrides(proxy, accepted) };
}

/** Where an override lands in the proxy container: `image`, `resources.requests.cpu`, ... */
export function overrideField(name: OverrideName): string {
  return name === OverrideName.image ? 'image' : `resources.${RESOURCE_TARGETS[name].kind}.${RESOURCE_TARGETS[name].resource}`;
}

/** The valid and allowed overrides of one layer (a Pod's or a namespace's annotations) into `into`. */
function readLayer(
  annotations: JsonObject | Readonly<Record<string, string>> | undefined,
  allowed: readonly OverrideName[],
  where: string,
  kept: (name: OverrideName) => string,
  warnings: string[],
  into: Map<OverrideName, string>,
): void {
  for (const name of ALL_OVERRIDES) {
    const annotation = OVERRIDE_ANNOTATION_PREFIX + name;
    const value = annotations === undefined ? undefined : own(annotations, annotation);
    if (value === undefined) continue;
    if (!allowed.includes(name)) {
      warnings.push(`${annotation}${where}: overriding ${describe(name)} is not allowed by this injector (allowed: ${allowed.map((a) => OVERRIDE_ANNOTATION_PREFIX + a).join(', ') || 'none'}); ${kept(name)}`);
      continue;
    }
    if (typeof value !== 'string') {
      warnings.push(`${annotation}${where}: ${describeValue(value)} must be a string; ${kept(name)}`);
      continue;
    }
    const problem = name === OverrideName.image ? imageProblem(value) : quantityProblem(value);
    if (problem !== undefined) {
      warnings.push(`${annotation}${where}: ${problem}; ${kept(name)}`);
      continue;
    }
    into.set(name, value);
  }
}

/** A request above its limit (after overrides) would make the API server refuse the Pod: such a layer's values of that resource are dropped. */
function dropConflicts(
  accepted: Map<OverrideName, string>,
  base: (name: OverrideName, kind: 'requests' | 'limits', resource: 'cpu' | 'memory') => string | undefined,
  where: string,
  keptOf: (names: readonly OverrideName[]) => string,
  warnings: string[],
): void {
  for (const resource of ['cpu', 'memory'] as const) {
    const requestName = resource === 'cpu' ? OverrideName.cpu : OverrideName.memory;
    const limitName = resource === 'cpu' ? OverrideName.cpuLimit : OverrideName.memoryLimit;
    if (!accepted.has(requestName) && !accepted.has(limitName)) continue;
    const request = accepted.get(requestName) ?? base(requestName, 'requests', resource);
    const limit = accepted.get(limitName) ?? base(limitName, 'limits', resource);
    const requestValue = request === undefined ? undefined : parseQuantity(request);
    const limitValue = limit === undefined ? undefined : parseQuantity(limit);
    if (requestValue !== undefined && limitValue !== undefined && isAbove(requestValue, limitValue)) {
      const involved = [requestName, limitName].filter((name) => accepted.has(name));
      for (const name of involved) accepted.delete(name);
      warnings.push(
        `${involved.map((name) => OVERRIDE_ANNOTATION_PREFIX + name).join(' and ')}${where}: the ${resource} request "${request}" is above the limit "${limit}"; ${keptOf([requestName, limitName])} ${resource} values were kept`,
      );
    }
  }
}

function applyOverrides(proxy: JsonObject, accepted: ReadonlyMap<OverrideName, { readonly value: string }>): JsonObject {
  if (accepted.size === 0) return proxy;
  const result: JsonObject = { ...proxy };
  let resources: JsonObject | undefined;
  for (const [name, { value }] of accepted) {
    if (name === OverrideName.image) {
      result['image'] = value;
      continue;
    }
    const { kind, resource } = RESOURCE_TARGETS[name];
    resources ??= { ...(objectAt(proxy, 'resources') ?? {}) };
    resources[kind] = { ...(objectAt(resources, kind) ?? {}), [resource]: value };
  }
  if (resources !== undefined) result['resources'] = resources;
  return result;
}

function describe(name: OverrideName): string {
  return name === OverrideName.image ? 'the proxy image' : `the proxy's ${RESOURCE_TARGETS[name].kind === 'limits' ? `${RESOURCE_TARGETS[name].resource} limit` : `${RESOURCE_TARGETS[name].resource} request`}`;
}

function templateQuantity(resources: JsonObject | undefined, kind: 'requests' | 'limits', resource: string): string | undefined {
  const amounts = objectAt(resources, kind);
  const value = amounts === undefined ? undefined : own(amounts, resource);
  return typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
}

function isAbove(request: Quantity, limit: Quantity): boolean {
  return compareQuantities(request, limit) > 0;
}
