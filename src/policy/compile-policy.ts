import { createHash } from 'node:crypto';
import { captureLists, captureSharedVariables, captureTemplateVariables, type CaptureLists } from './compile-capture.js';
import {
  ALWAYS_EXCLUDED_NAMESPACES,
  CAPTURE_INIT_NAME,
  CAPTURE_LOCK_VOLUME,
  Annotations,
  DEFAULT_ALLOWED_OVERRIDES,
  IMAGE_REFERENCE_PATTERN,
  MAX_IMAGE_NAME_LENGTH,
  MAX_IMAGE_REFERENCE_LENGTH,
  MAX_QUANTITY_EXPONENT,
  MAX_QUANTITY_LENGTH,
  NamespaceLabel,
  objectAt,
  OVERRIDE_ANNOTATION_PREFIX,
  OverrideName,
  own,
  QUANTITY_PATTERN,
  RESOURCE_TARGETS,
  Rule,
  type JsonObject,
  type SidecarTemplate,
  type TemplateSet,
} from '../injection/index.js';
import { PolicyLimitError } from '../errors.js';
import { celDyn, celMap, celString, celValue, type CelMapEntry } from './cel-literal.js';
import { policyLimitProblems } from './policy-limits.js';
import { policyApiVersionString, type PolicyApiVersion } from './policy-api-version.js';

/** What the policy needs besides the templates: the webhook's settings of the same name. */
export interface PolicySettings {
  /** Name of the policy and its binding. */
  readonly name?: string;
  /** The injector's own namespace: always excluded. */
  readonly injectorNamespace?: string | undefined;
  /** Namespaces never injected, beyond kube-system, kube-public and kube-node-lease. */
  readonly excludedNamespaces?: readonly string[];
  /** Native sidecars unless the template or the Pod says otherwise. */
  readonly nativeSidecar?: boolean;
  /** Which `envoy-injector.io/proxy-*` annotations Pods may use. */
  readonly allowedOverrides?: readonly OverrideName[];
  /** What the API server does when an expression fails: as the webhook's failurePolicy. */
  readonly failurePolicy?: 'Fail' | 'Ignore';
  /** Labels for both objects (the chart's, or the command's). */
  readonly labels?: Readonly<Record<string, string>>;
  /** The API version of both objects (default v1, Kubernetes 1.36+). */
  readonly apiVersion?: PolicyApiVersion;
  /** An object whose deletion deletes both (the garbage collector follows the ownerReference). */
  readonly owner?: PolicyOwner;
  /**
   * Which release of the settings made the objects (the chart passes its
   * revision): a controller finding a higher one in the cluster stands by,
   * so an old replica never reverts a newer one during a rolling upgrade.
   */
  readonly generation?: number;
}

/** A cluster-scoped object, as an ownerReference names it. */
export interface PolicyOwner {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
}

export const DEFAULT_POLICY_NAME = 'envoy-injector';
/** On the policy: the hashes of the templates it was compiled from, so a controller can tell it is current. */
export const TEMPLATES_ANNOTATION = 'envoy-injector.io/templates';
/** On the policy: a hash of everything that shapes both objects (templates and settings alike). */
export const POLICY_HASH_ANNOTATION = 'envoy-injector.io/policy-hash';
/** On the policy: the generation of the settings that made it (PolicySettings.generation). */
export const POLICY_GENERATION_ANNOTATION = 'envoy-injector.io/policy-generation';

export interface CompiledPolicy {
  readonly policy: JsonObject;
  readonly binding: JsonObject;
}

/**
 * Compiles a validated template set and the webhook's settings into a
 * MutatingAdmissionPolicy and its binding whose JSON Patch has, on every Pod,
 * the effect of the webhook's patch (docs/design.md §4-§5). The split:
 * - the binding's namespaceSelector: excluded namespaces and the `disabled` label;
 * - matchConditions: what the Pod alone decides (opted out, hostNetwork,
 *   already injected, an unknown template);
 * - the mutation: the `enabled` namespace label (namespaceObject is only
 *   given to mutations), then the merge by name, per template.
 * Throws PolicyLimitError when the API server would refuse the result.
 */
export function compilePolicy(templates: TemplateSet, settings: PolicySettings = {}): CompiledPolicy {
  const name = settings.name ?? DEFAULT_POLICY_NAME;
  const allowed = settings.allowedOverrides ?? DEFAULT_ALLOWED_OVERRIDES;
  const entries = [...templates.templates.values()];
  const apiVersion = policyApiVersionString(settings.apiVersion ?? 'v1');
  const owner = settings.owner;
  const metadata = (annotations?: Record<string, string>): JsonObject => ({
    name,
    ...(settings.labels === undefined ? {} : { labels: { ...settings.labels } }),
    ...(annotations === undefined ? {} : { annotations }),
    ...(owner === undefined ? {} : { ownerReferences: [{ apiVersion: owner.apiVersion, kind: owner.kind, name: owner.name, uid: owner.uid }] }),
  });

  const policy: JsonObject = {
    apiVersion,
    kind: 'MutatingAdmissionPolicy',
    metadata: metadata({ [TEMPLATES_ANNOTATION]: templatesFingerprint(templates) }),
    spec: {
      failurePolicy: settings.failurePolicy ?? 'Fail',
      // As the webhook: run again when a later mutation changed the Pod; the status annotation makes that a no-op.
      reinvocationPolicy: 'IfNeeded',
      matchConstraints: {
        matchPolicy: 'Equivalent',
        resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], scope: 'Namespaced' }],
      },
      matchConditions: matchConditions([...templates.templates.keys()], templates.defaultTemplate.name),
      variables: variables(entries, templates.defaultTemplate.name, allowed, settings.nativeSidecar ?? false),
      mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: patchExpression(entries) } }],
    },
  };
  const excluded = [...new Set([...ALWAYS_EXCLUDED_NAMESPACES, ...(settings.injectorNamespace ? [settings.injectorNamespace] : []), ...(settings.excludedNamespaces ?? [])])];
  const binding: JsonObject = {
    apiVersion,
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: metadata(),
    spec: {
      policyName: name,
      matchResources: {
        namespaceSelector: {
          matchExpressions: [
            { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: excluded },
            { key: NamespaceLabel.key, operator: 'NotIn', values: [NamespaceLabel.disabled] },
          ],
        },
      },
    },
  };
  const problems = policyLimitProblems(templates, policy);
  if (problems.length > 0) throw new PolicyLimitError(problems);
  const annotations = (policy['metadata'] as { annotations: Record<string, string> }).annotations;
  annotations[POLICY_HASH_ANNOTATION] = 'sha256:' + createHash('sha256').update(JSON.stringify([policy['spec'], binding['spec']])).digest('hex').slice(0, 16);
  if (settings.generation !== undefined) annotations[POLICY_GENERATION_ANNOTATION] = String(settings.generation);
  return { policy, binding };
}

/** Where each rule of docs/design.md §4 lives in the compiled objects (for `explain --mode policy`). */
export const POLICY_RULE_PLACES: Readonly<Record<Rule, string>> = {
  [Rule.kind]: 'policy matchConstraints: Pods, CREATE',
  [Rule.excludedNamespace]: 'binding namespaceSelector: kubernetes.io/metadata.name NotIn',
  [Rule.namespaceDisabled]: `binding namespaceSelector: ${NamespaceLabel.key} NotIn ${NamespaceLabel.disabled}`,
  [Rule.podAnnotation]: 'matchCondition not-opted-out; the mutation\'s explicit request',
  [Rule.podSelector]: 'matchCondition not-never-selected; the mutation\'s always-selected',
  [Rule.namespaceEnabled]: 'the mutation: namespaceObject labels',
  [Rule.hostNetwork]: 'matchCondition not-host-network',
  [Rule.alreadyInjected]: 'matchCondition not-injected',
  [Rule.template]: 'matchCondition known-template; the mutation\'s branch per template',
};

/** The templates' names and hashes, as the policy's TEMPLATES_ANNOTATION holds them. */
export function templatesFingerprint(templates: TemplateSet): string {
  return [...templates.templates.values()].map((template) => `${template.name}=${template.hash}`).join(',');
}

/** `object.metadata.annotations[key]`, or `fallback` when there is none. */
function podAnnotation(key: string, fallback = ''): string {
  return `(has(object.metadata.annotations) ? object.metadata.annotations[?${celString(key)}].orValue(${celString(fallback)}) : ${celString(fallback)})`;
}

function annotation(key: string, fallback = ''): string {
  return `variables.annotations[?${celString(key)}].orValue(${celString(fallback)})`;
}

/** Asked for by the Pod itself: `inject: "true"` or the seed's annotation (only reached when not `"false"`). */
function explicitRequest(read: (key: string) => string): string {
  return `${read(Annotations.inject)} == "true" || ${read(Annotations.legacyInject)} == "true"`;
}

function matchConditions(templateNames: readonly string[], defaultName: string): JsonObject[] {
  return [
    { name: 'not-opted-out', expression: `${podAnnotation(Annotations.inject)} != "false"` },
    {
      name: 'not-host-network',
      expression: `!has(object.spec.hostNetwork) || !object.spec.hostNetwork || ${explicitRequest((key) => podAnnotation(key))}`,
    },
    {
      name: 'not-injected',
      expression: `!has(object.metadata.annotations) || !(${celString(Annotations.status)} in object.metadata.annotations)`,
    },
    {
      name: 'known-template',
      expression: `${podAnnotation(Annotations.template, defaultName)} in ${celValue([...templateNames])}`,
    },
  ];
}

const ResourceOverrides = [OverrideName.cpu, OverrideName.memory, OverrideName.cpuLimit, OverrideName.memoryLimit] as const;
type ResourceOverride = (typeof ResourceOverrides)[number];

/** Variable names of each override's accepted value ("" when absent or invalid). */
const OVERRIDE_VARIABLES: Readonly<Record<OverrideName, string>> = {
  [OverrideName.image]: 'proxyImage',
  [OverrideName.cpu]: 'proxyCpu',
  [OverrideName.memory]: 'proxyMemory',
  [OverrideName.cpuLimit]: 'proxyCpuLimit',
  [OverrideName.memoryLimit]: 'proxyMemoryLimit',
};

function variables(entries: readonly SidecarTemplate[], defaultName: string, allowed: readonly OverrideName[], nativeDefault: boolean): JsonObject[] {
  const list: JsonObject[] = [];
  const add = (name: string, expression: string): void => void list.push({ name, expression });
  const names = (field: string, fallback = false): string =>
    `(has(object.spec.${field}) ? object.spec.${field}.map(e, ${fallback ? 'has(e.name) ? e.name : ""' : 'e.name'}) : [])`;

  add('annotations', 'has(object.metadata.annotations) ? object.metadata.annotations : {}');
  add('explicit', explicitRequest(annotation));
  add(
    'inject',
    `variables.explicit || (has(namespaceObject.metadata.labels) && namespaceObject.metadata.labels[?${celString(NamespaceLabel.key)}].orValue("") == ${celString(NamespaceLabel.enabled)})`,
  );
  add('template', annotation(Annotations.template, defaultName));
  add('nativeAnnotation', annotation(Annotations.nativeSidecar));
  // Kubernetes wants container names unique across all container lists.
  add('containerNames', `${names('containers')} + ${names('initContainers')} + ${names('ephemeralContainers')}`);
  add('volumeNames', names('volumes'));
  add('pullSecretNames', names('imagePullSecrets', true));
  list.push(...captureSharedVariables(entries));

  for (const override of allowed) {
    const value = annotation(OVERRIDE_ANNOTATION_PREFIX + override);
    const raw = `${OVERRIDE_VARIABLES[override]}Raw`;
    add(raw, value);
    add(OVERRIDE_VARIABLES[override], `${overrideIsValid(override, `variables.${raw}`)} ? variables.${raw} : ""`);
  }

  entries.forEach((template, index) => {
    const prefix = `t${index}`;
    const proxy = template.containers[0];
    for (const resource of ['cpu', 'memory'] as const) {
      const conflict = resourceConflict(proxy, resource, allowed);
      if (conflict !== undefined) add(`${prefix}${capitalize(resource)}Conflict`, conflict);
    }
    const native = template.nativeSidecar ?? nativeDefault ? 'variables.nativeAnnotation != "false"' : 'variables.nativeAnnotation == "true"';
    add(`${prefix}Native`, native);
    const sidecars = template.containers.map((container, position) =>
      containerLiteral(container, position === 0 ? { prefix, allowed } : undefined, `variables.${prefix}Native`),
    );
    add(`${prefix}Containers`, filterNew(sidecars, 'variables.containerNames'));
    // Prepended one by one at index 0: the last first, so they keep the template's order.
    add(`${prefix}ContainersReversed`, filterNew([...sidecars].reverse(), 'variables.containerNames'));
    add(`${prefix}InitContainers`, filterNew(template.initContainers.map((entry) => celValue(entry)), 'variables.containerNames'));
    add(`${prefix}Volumes`, filterNew(template.volumes.map((entry) => celValue(entry)), 'variables.volumeNames'));
    add(`${prefix}PullSecrets`, filterNew(template.imagePullSecrets.map((entry) => celValue(entry)), 'variables.pullSecretNames'));
    list.push(...captureTemplateVariables(template, prefix));
    add(`${prefix}Status`, statusText(template, prefix));
  });
  return list;
}

/** The entries of `literals` whose name is not in `taken` (the Pod's own win). */
function filterNew(literals: readonly string[], taken: string): string {
  return literals.length === 0 ? '[]' : `[${literals.join(', ')}].filter(e, !(e.name in ${taken}))`;
}

/** As `quantityProblem` and `imageProblem` of the webhook: the same grammar, the same bounds. */
function overrideIsValid(override: OverrideName, value: string): string {
  if (override === OverrideName.image) {
    // The repository is what comes before the tag: the last ':' not followed by a '/'.
    const beforeDigest = `${value}.split("@")[0]`;
    const repository = `(${beforeDigest}.lastIndexOf(":") > ${beforeDigest}.lastIndexOf("/") ? ${beforeDigest}.substring(0, ${beforeDigest}.lastIndexOf(":")) : ${beforeDigest})`;
    return `(${value} != "" && size(${value}) <= ${MAX_IMAGE_REFERENCE_LENGTH} && ${value}.matches(${celString(IMAGE_REFERENCE_PATTERN)}) && size(${repository}) <= ${MAX_IMAGE_NAME_LENGTH})`;
  }
  // The exponent's significant digits (empty for none or 0): at most MAX_QUANTITY_EXPONENT, as parseQuantity bounds it.
  const exponent = `${value}.find("[1-9][0-9]*$")`;
  const exponentBounded = `(!${value}.matches("[eE][+-]?[0-9]+$") || ${exponent} == "" || (size(${exponent}) <= ${String(MAX_QUANTITY_EXPONENT).length} && int(${exponent}) <= ${MAX_QUANTITY_EXPONENT}))`;
  return `(${value} != "" && size(${value}) <= ${MAX_QUANTITY_LENGTH} && ${value}.matches(${celString(QUANTITY_PATTERN)}) && ${exponentBounded} && isQuantity(${value}) && !quantity(${value}).isLessThan(quantity("0")))`;
}

/** The template's quantity as text, as the webhook compares it. */
function templateQuantity(proxy: JsonObject | undefined, kind: 'requests' | 'limits', resource: string): string | undefined {
  const amounts = objectAt(objectAt(proxy, 'resources'), kind);
  const value = amounts === undefined ? undefined : own(amounts, resource);
  return typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
}

function overrideFor(kind: 'requests' | 'limits', resource: string): ResourceOverride {
  const found = ResourceOverrides.find((name) => RESOURCE_TARGETS[name].kind === kind && RESOURCE_TARGETS[name].resource === resource);
  if (found === undefined) throw new Error(`no override for ${kind}.${resource}`);
  return found;
}

/**
 * True when the overridden request would be above the limit: the webhook then
 * keeps the template's values of that resource. Undefined when no override of
 * the resource is allowed.
 */
function resourceConflict(proxy: JsonObject | undefined, resource: 'cpu' | 'memory', allowed: readonly OverrideName[]): string | undefined {
  const request = overrideFor('requests', resource);
  const limit = overrideFor('limits', resource);
  if (!allowed.includes(request) && !allowed.includes(limit)) return undefined;
  const accepted = (name: ResourceOverride): string => (allowed.includes(name) ? `variables.${OVERRIDE_VARIABLES[name]}` : '""');
  const effective = (name: ResourceOverride, kind: 'requests' | 'limits'): string => {
    const fallback = templateQuantity(proxy, kind, resource);
    if (!allowed.includes(name)) return celString(fallback ?? '');
    return fallback === undefined ? accepted(name) : `(${accepted(name)} != "" ? ${accepted(name)} : ${celString(fallback)})`;
  };
  const effectiveRequest = effective(request, 'requests');
  const effectiveLimit = effective(limit, 'limits');
  return (
    `(${accepted(request)} != "" || ${accepted(limit)} != "") && ${effectiveRequest} != "" && ${effectiveLimit} != "" && ` +
    `quantity(${effectiveRequest}).isGreaterThan(quantity(${effectiveLimit}))`
  );
}

/**
 * A template container as a CEL map. The proxy (`overrides` given) gets the
 * accepted overrides; `native` adds `restartPolicy: Always` when it holds.
 */
function containerLiteral(
  container: JsonObject,
  overrides: { readonly prefix: string; readonly allowed: readonly OverrideName[] } | undefined,
  native: string,
): string {
  const entries: CelMapEntry[] = [];
  const allowed = overrides?.allowed ?? [];
  const resourceOverrides = ResourceOverrides.filter((name) => allowed.includes(name));
  for (const [key, value] of Object.entries(container)) {
    if (key === 'image' && allowed.includes(OverrideName.image)) {
      entries.push({ key, expression: celDyn(`variables.proxyImage != "" ? variables.proxyImage : ${celValue(value)}`) });
    } else if (key === 'resources' && overrides !== undefined && resourceOverrides.length > 0) {
      entries.push(resourcesEntry(objectAt(container, 'resources'), overrides.prefix, resourceOverrides));
    } else entries.push({ key, expression: celDyn(celValue(value)) });
  }
  if (overrides !== undefined && resourceOverrides.length > 0 && own(container, 'resources') === undefined) {
    entries.push(resourcesEntry(undefined, overrides.prefix, resourceOverrides));
  }
  entries.push({ key: 'restartPolicy', expression: `${native} ? optional.of(dyn("Always")) : optional.none()`, optional: true });
  return celMap(entries);
}

/** Applied when accepted and not in conflict with its request or limit. */
function overrideApplied(prefix: string, name: ResourceOverride): string {
  const resource = RESOURCE_TARGETS[name].resource;
  return `(variables.${OVERRIDE_VARIABLES[name]} != "" && !variables.${prefix}${capitalize(resource)}Conflict)`;
}

/**
 * `resources` of the proxy with the overrides: an overridden quantity replaces
 * the template's, or is added; a map the template lacks is added only when an
 * override lands in it.
 */
function resourcesEntry(resources: JsonObject | undefined, prefix: string, overrides: readonly ResourceOverride[]): CelMapEntry {
  const entries: CelMapEntry[] = [];
  const kinds = ['requests', 'limits'] as const;
  for (const [key, value] of Object.entries(resources ?? {})) {
    if (!kinds.some((kind) => kind === key)) entries.push({ key, expression: celDyn(celValue(value)) });
  }
  const anyApplied = (names: readonly ResourceOverride[]): string => names.map((name) => overrideApplied(prefix, name)).join(' || ');
  for (const kind of kinds) {
    const inKind = overrides.filter((name) => RESOURCE_TARGETS[name].kind === kind);
    const amounts = objectAt(resources, kind);
    const present = resources !== undefined && own(resources, kind) !== undefined;
    if (inKind.length === 0) {
      if (present) entries.push({ key: kind, expression: celDyn(celValue(own(resources, kind) ?? null)) });
      continue;
    }
    const map = amountsLiteral(amounts, prefix, inKind);
    entries.push(
      present && amounts !== undefined
        ? { key: kind, expression: celDyn(map) }
        : { key: kind, expression: `${anyApplied(inKind)} ? optional.of(dyn(${map})) : optional.none()`, optional: true },
    );
  }
  const map = celMap(entries);
  return resources === undefined
    ? { key: 'resources', expression: `${anyApplied(overrides)} ? optional.of(dyn(${map})) : optional.none()`, optional: true }
    : { key: 'resources', expression: celDyn(map) };
}

function amountsLiteral(amounts: JsonObject | undefined, prefix: string, overrides: readonly ResourceOverride[]): string {
  const entries: CelMapEntry[] = [];
  const overridden = new Map(overrides.map((name) => [RESOURCE_TARGETS[name].resource as string, name]));
  for (const [resource, value] of Object.entries(amounts ?? {})) {
    const name = overridden.get(resource);
    entries.push({
      key: resource,
      expression:
        name === undefined
          ? celDyn(celValue(value))
          : `${overrideApplied(prefix, name)} ? dyn(variables.${OVERRIDE_VARIABLES[name]}) : ${celDyn(celValue(value))}`,
    });
  }
  for (const [resource, name] of overridden) {
    if (amounts !== undefined && own(amounts, resource) !== undefined) continue;
    entries.push({
      key: resource,
      expression: `${overrideApplied(prefix, name)} ? optional.of(dyn(variables.${OVERRIDE_VARIABLES[name]})) : optional.none()`,
      optional: true,
    });
  }
  return celMap(entries);
}

/**
 * One template's patch: the webhook's lists, in its order, then the status
 * annotation. With capture, envoy-init goes first (native) or last (classic)
 * among the init containers, and its volume after the template's.
 */
function templatePatch(index: number, capture: CaptureLists | undefined): string {
  const v = (name: string): string => `variables.t${index}${name}`;
  const native = v('Native');
  const { leading, leadingReversed, trailing, volumes } = patchLists(v, capture);
  const parts = [
    `(${native} ? [] : ${listOps('containers', undefined, v('Containers'))})`,
    `(${native} ? ${listOps('initContainers', { list: leading, reversed: leadingReversed }, v('InitContainers'))} : ${listOps('initContainers', undefined, trailing)})`,
    listOps('volumes', undefined, volumes),
    listOps('imagePullSecrets', undefined, v('PullSecrets')),
    `[${statusOp(v('Status'))}]`,
  ];
  return parts.join(' + ');
}

/** The lists of a template's patch, capture's entries included when it has them. */
function patchLists(v: (name: string) => string, capture: CaptureLists | undefined): { leading: string; leadingReversed: string; trailing: string; volumes: string } {
  if (capture === undefined) return { leading: v('Containers'), leadingReversed: v('ContainersReversed'), trailing: v('InitContainers'), volumes: v('Volumes') };
  return {
    leading: `(${capture.init} + ${v('Containers')})`,
    leadingReversed: `(${v('ContainersReversed')} + ${capture.init})`,
    trailing: `(${v('InitContainers')} + ${capture.init})`,
    volumes: `(${v('Volumes')} + ${capture.volume})`,
  };
}

/**
 * Adds `prepend` at the front and `append` at the end of `spec.<field>`: a
 * missing list is added whole (`add .../-` on a missing list fails).
 */
function listOps(field: string, prepend: { list: string; reversed: string } | undefined, append: string): string {
  const whole = prepend === undefined ? append : `${prepend.list} + ${append}`;
  const path = (suffix: string): string => celString(`/spec/${field}${suffix}`);
  const added = `${append}.map(e, JSONPatch{op: "add", path: ${path('/-')}, value: e})`;
  const existing = prepend === undefined ? added : `${prepend.reversed}.map(e, JSONPatch{op: "add", path: ${path('/0')}, value: e}) + ${added}`;
  return `(!has(object.spec.${field}) ? (size(${whole}) == 0 ? [] : [JSONPatch{op: "add", path: ${path('')}, value: ${whole}}]) : ${existing})`;
}

/**
 * `envoy-injector.io/status` as the webhook writes it: JSON.stringify of the
 * template, its hash and the names added. Every name comes from the
 * template, so each one's JSON text (quotes and backslashes escaped) is a
 * literal looked up by name: byte for byte JSON.stringify's.
 */
function statusText(template: SidecarTemplate, prefix: string): string {
  const v = (name: string): string => `variables.${prefix}${name}`;
  const entries = [...template.containers, ...template.initContainers, ...template.volumes, ...template.imagePullSecrets];
  // Capture adds its init container and lock volume: their names can land in the status too.
  const known = [...entries.map((entry) => String(entry['name'])), ...(template.capture === undefined ? [] : [CAPTURE_INIT_NAME, CAPTURE_LOCK_VOLUME])];
  const encoded = celMap([...new Set(known)].map((name) => ({ key: name, expression: celString(JSON.stringify(name)) })));
  const names = (list: string): string => `${list}.map(e, ${encoded}[e.name]).join(",")`;
  const native = v('Native');
  const head = JSON.stringify({ template: template.name, hash: template.hash }).slice(0, -1);
  const { leading, trailing, volumes } = patchLists(v, captureLists(template, prefix));
  return [
    celString(`${head},"containers":[`),
    `(${native} ? "" : ${names(v('Containers'))})`,
    celString('],"initContainers":['),
    `(${native} ? ${names(`(${leading} + ${v('InitContainers')})`)} : ${names(trailing)})`,
    celString('],"volumes":['),
    names(volumes),
    celString('],"imagePullSecrets":['),
    names(v('PullSecrets')),
    celString(']}'),
  ].join(' + ');
}

/** Adds the status annotation without replacing the map (which would wipe the others). */
function statusOp(status: string): string {
  const key = celString(Annotations.status);
  return (
    `has(object.metadata.annotations) ? ` +
    `JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey(${key}), value: ${status}} : ` +
    `JSONPatch{op: "add", path: "/metadata/annotations", value: {${key}: ${status}}}`
  );
}

function patchExpression(entries: readonly SidecarTemplate[]): string {
  let expression = '[]';
  for (let index = entries.length - 1; index >= 0; index -= 1) {
    const template = entries[index];
    if (template === undefined) continue;
    expression = `variables.template == ${celString(template.name)} ? ${templatePatch(index, captureLists(template, `t${index}`))} : ${expression}`;
  }
  return `!variables.inject ? [] : ${expression}`;
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

/** The compiled objects as JSON values, policy first (the binding refers to it). */
export function policyObjects(compiled: CompiledPolicy): JsonObject[] {
  return [compiled.policy, compiled.binding];
}
