import {
  IMAGE_REFERENCE_PATTERN,
  MAX_IMAGE_NAME_LENGTH,
  MAX_IMAGE_REFERENCE_LENGTH,
  MAX_QUANTITY_EXPONENT,
  MAX_QUANTITY_LENGTH,
  objectAt,
  OVERRIDE_ANNOTATION_PREFIX,
  OverrideName,
  own,
  QUANTITY_PATTERN,
  RESOURCE_TARGETS,
  type JsonObject,
} from '../injection/index.js';
import { celDyn, celMap, celString, celValue, type CelMapEntry } from './cel-literal.js';
import { annotation } from './cel-pod.js';

/**
 * The proxy's overrides in policy mode (docs/design.md §5): each
 * `proxy-*` annotation of the Pod and of its namespace accepted by the
 * webhook's grammar and bounds; the namespace's values checked against the
 * template (a request above its limit keeps the template's values), the
 * Pod's against what the namespace left; and the proxy container with the
 * resulting values in place.
 */

const ResourceOverrides = [OverrideName.cpu, OverrideName.memory, OverrideName.cpuLimit, OverrideName.memoryLimit] as const;
type ResourceOverride = (typeof ResourceOverrides)[number];

/** Variable names of each Pod override's accepted value ("" when absent or invalid); `ns` + the capitalized name for the namespace's. */
const OVERRIDE_VARIABLES: Readonly<Record<OverrideName, string>> = {
  [OverrideName.image]: 'proxyImage',
  [OverrideName.cpu]: 'proxyCpu',
  [OverrideName.memory]: 'proxyMemory',
  [OverrideName.cpuLimit]: 'proxyCpuLimit',
  [OverrideName.memoryLimit]: 'proxyMemoryLimit',
};

function namespaceVariable(name: OverrideName): string {
  return `ns${capitalize(OVERRIDE_VARIABLES[name])}`;
}

/** The image the proxy gets: the Pod's accepted one, else its namespace's, else "" (the template's). */
const PROXY_IMAGE = 'effectiveProxyImage';

/**
 * Whether the Pod or its namespace gives any allowed override a value: when
 * neither does (most Pods), every accepted value is "" and the proxy is the
 * template's, so the container reads this one variable instead of the ~30
 * that check, compare and resolve the overrides (the API server evaluates a
 * variable on first use: each is a program run of its own, ~10-20 µs).
 */
export const OVERRIDES_GIVEN = 'overridesGiven';

/** Per allowed override: its raw annotations (Pod, namespace) and their accepted values ("" when absent or invalid). */
export function overrideVariables(allowed: readonly OverrideName[]): JsonObject[] {
  const variables = allowed.flatMap((override) => {
    const raw = `${OVERRIDE_VARIABLES[override]}Raw`;
    const namespaceRaw = `${namespaceVariable(override)}Raw`;
    return [
      { name: raw, expression: annotation(OVERRIDE_ANNOTATION_PREFIX + override) },
      { name: OVERRIDE_VARIABLES[override], expression: `${overrideIsValid(override, `variables.${raw}`)} ? variables.${raw} : ""` },
      { name: namespaceRaw, expression: `variables.namespaceAnnotations[?${celString(OVERRIDE_ANNOTATION_PREFIX + override)}].orValue("")` },
      { name: namespaceVariable(override), expression: `${overrideIsValid(override, `variables.${namespaceRaw}`)} ? variables.${namespaceRaw} : ""` },
    ];
  });
  if (allowed.includes(OverrideName.image)) {
    const pod = `variables.${OVERRIDE_VARIABLES[OverrideName.image]}`;
    variables.push({ name: PROXY_IMAGE, expression: `${pod} != "" ? ${pod} : variables.${namespaceVariable(OverrideName.image)}` });
  }
  if (allowed.length > 0) {
    const given = allowed.flatMap((override) => {
      const key = celString(OVERRIDE_ANNOTATION_PREFIX + override);
      return [`${annotation(OVERRIDE_ANNOTATION_PREFIX + override)} != ""`, `variables.namespaceAnnotations[?${key}].orValue("") != ""`];
    });
    variables.push({ name: OVERRIDES_GIVEN, expression: given.join(' || ') });
  }
  return variables;
}

/**
 * Per resource with an allowed override, for the template `prefix`: whether
 * the namespace's values would put its request above its limit, the
 * namespace's values left, whether the Pod's would then, and the value each
 * override gives the proxy ("" for the template's).
 */
export function conflictVariables(proxy: JsonObject | undefined, prefix: string, allowed: readonly OverrideName[]): JsonObject[] {
  return (['cpu', 'memory'] as const).flatMap((resource) => {
    const names = [overrideFor('requests', resource), overrideFor('limits', resource)].filter((name) => allowed.includes(name));
    if (names.length === 0) return [];
    const template = (name: ResourceOverride): string => celString(templateQuantity(proxy, RESOURCE_TARGETS[name].kind, resource) ?? '');
    const namespaceConflict = `${prefix}Ns${capitalize(resource)}Conflict`;
    const namespaceLeft = (name: ResourceOverride): string => `${prefix}Ns${capitalize(OVERRIDE_VARIABLES[name])}`;
    const podConflict = `${prefix}${capitalize(resource)}Conflict`;
    const base = (name: ResourceOverride): string => (allowed.includes(name) ? `(variables.${namespaceLeft(name)} != "" ? variables.${namespaceLeft(name)} : ${template(name)})` : template(name));
    return [
      { name: namespaceConflict, expression: resourceConflict(resource, allowed, (name) => `variables.${namespaceVariable(name)}`, template) },
      ...names.map((name) => ({ name: namespaceLeft(name), expression: `variables.${namespaceVariable(name)} != "" && !variables.${namespaceConflict} ? variables.${namespaceVariable(name)} : ""` })),
      { name: podConflict, expression: resourceConflict(resource, allowed, (name) => `variables.${OVERRIDE_VARIABLES[name]}`, base) },
      ...names.map((name) => ({
        name: effectiveVariable(prefix, name),
        expression: `variables.${OVERRIDE_VARIABLES[name]} != "" && !variables.${podConflict} ? variables.${OVERRIDE_VARIABLES[name]} : variables.${namespaceLeft(name)}`,
      })),
    ];
  });
}

/** The value a resource override gives the template `prefix`'s proxy ("" for the template's own). */
function effectiveVariable(prefix: string, name: ResourceOverride): string {
  return `${prefix}${capitalize(OVERRIDE_VARIABLES[name])}`;
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
 * True when one layer's accepted values (`accepted`, "" for none) would put
 * the request above the limit, with `fallback` (a CEL string) where that
 * layer has no value: the webhook then drops that layer's values of the
 * resource. Only allowed overrides are read.
 */
function resourceConflict(resource: 'cpu' | 'memory', allowed: readonly OverrideName[], accepted: (name: ResourceOverride) => string, fallback: (name: ResourceOverride) => string): string {
  const request = overrideFor('requests', resource);
  const limit = overrideFor('limits', resource);
  const value = (name: ResourceOverride): string => (allowed.includes(name) ? accepted(name) : '""');
  const effective = (name: ResourceOverride): string => (allowed.includes(name) ? `(${value(name)} != "" ? ${value(name)} : ${fallback(name)})` : fallback(name));
  const effectiveRequest = effective(request);
  const effectiveLimit = effective(limit);
  return (
    `(${value(request)} != "" || ${value(limit)} != "") && ${effectiveRequest} != "" && ${effectiveLimit} != "" && ` +
    `quantity(${effectiveRequest}).isGreaterThan(quantity(${effectiveLimit}))`
  );
}

/**
 * A template container as a CEL map. The proxy (`overrides` given) gets the
 * accepted overrides; `native` (an expression, or known when compiling) adds
 * `restartPolicy: Always` when it holds; `replaced` entries (the proxy's
 * lifecycle) take the place of the container's of the same key, or join it.
 */
export function containerLiteral(
  container: JsonObject,
  overrides: { readonly prefix: string; readonly allowed: readonly OverrideName[] } | undefined,
  native: string | boolean,
  replaced: readonly CelMapEntry[] = [],
): string {
  const entries: CelMapEntry[] = [];
  const allowed = overrides?.allowed ?? [];
  const resourceOverrides = ResourceOverrides.filter((name) => allowed.includes(name));
  for (const [key, value] of Object.entries(container)) {
    const replacement = replaced.find((entry) => entry.key === key);
    if (replacement !== undefined) entries.push(replacement);
    else if (key === 'image' && allowed.includes(OverrideName.image)) {
      entries.push({ key, expression: celDyn(`variables.${OVERRIDES_GIVEN} && variables.${PROXY_IMAGE} != "" ? variables.${PROXY_IMAGE} : ${celValue(value)}`) });
    } else if (key === 'resources' && overrides !== undefined && resourceOverrides.length > 0) {
      entries.push(resourcesEntry(objectAt(container, 'resources'), overrides.prefix, resourceOverrides));
    } else entries.push({ key, expression: celDyn(celValue(value)) });
  }
  if (overrides !== undefined && resourceOverrides.length > 0 && own(container, 'resources') === undefined) {
    entries.push(resourcesEntry(undefined, overrides.prefix, resourceOverrides));
  }
  entries.push(...replaced.filter((entry) => own(container, entry.key) === undefined));
  if (native === true) entries.push({ key: 'restartPolicy', expression: 'dyn("Always")' });
  else if (native !== false) entries.push({ key: 'restartPolicy', expression: `${native} ? optional.of(dyn("Always")) : optional.none()`, optional: true });
  return celMap(entries);
}

/** Applied when the Pod's or the namespace's value was accepted and not in conflict with its request or limit. */
function overrideApplied(prefix: string, name: ResourceOverride): string {
  return `(variables.${OVERRIDES_GIVEN} && variables.${effectiveVariable(prefix, name)} != "")`;
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
          : `${overrideApplied(prefix, name)} ? dyn(variables.${effectiveVariable(prefix, name)}) : ${celDyn(celValue(value))}`,
    });
  }
  for (const [resource, name] of overridden) {
    if (amounts !== undefined && own(amounts, resource) !== undefined) continue;
    entries.push({
      key: resource,
      expression: `${overrideApplied(prefix, name)} ? optional.of(dyn(variables.${effectiveVariable(prefix, name)})) : optional.none()`,
      optional: true,
    });
  }
  return celMap(entries);
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
