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
 * `proxy-*` annotation accepted by the webhook's grammar and bounds, a
 * request above its limit keeping the template's values, and the proxy
 * container with the accepted values in place.
 */

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

/** Per allowed override: its raw annotation and its accepted value ("" when absent or invalid). */
export function overrideVariables(allowed: readonly OverrideName[]): JsonObject[] {
  return allowed.flatMap((override) => {
    const raw = `${OVERRIDE_VARIABLES[override]}Raw`;
    return [
      { name: raw, expression: annotation(OVERRIDE_ANNOTATION_PREFIX + override) },
      { name: OVERRIDE_VARIABLES[override], expression: `${overrideIsValid(override, `variables.${raw}`)} ? variables.${raw} : ""` },
    ];
  });
}

/** Per resource with an allowed override: whether the template's (`prefix`) overridden request would exceed its limit. */
export function conflictVariables(proxy: JsonObject | undefined, prefix: string, allowed: readonly OverrideName[]): JsonObject[] {
  return (['cpu', 'memory'] as const).flatMap((resource) => {
    const conflict = resourceConflict(proxy, resource, allowed);
    return conflict === undefined ? [] : [{ name: conflictVariable(prefix, resource), expression: conflict }];
  });
}

function conflictVariable(prefix: string, resource: string): string {
  return `${prefix}${capitalize(resource)}Conflict`;
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
 * accepted overrides; `native` adds `restartPolicy: Always` when it holds;
 * `replaced` entries (the proxy's lifecycle) take the place of the
 * container's of the same key, or join it.
 */
export function containerLiteral(
  container: JsonObject,
  overrides: { readonly prefix: string; readonly allowed: readonly OverrideName[] } | undefined,
  native: string,
  replaced: readonly CelMapEntry[] = [],
): string {
  const entries: CelMapEntry[] = [];
  const allowed = overrides?.allowed ?? [];
  const resourceOverrides = ResourceOverrides.filter((name) => allowed.includes(name));
  for (const [key, value] of Object.entries(container)) {
    const replacement = replaced.find((entry) => entry.key === key);
    if (replacement !== undefined) entries.push(replacement);
    else if (key === 'image' && allowed.includes(OverrideName.image)) {
      entries.push({ key, expression: celDyn(`variables.proxyImage != "" ? variables.proxyImage : ${celValue(value)}`) });
    } else if (key === 'resources' && overrides !== undefined && resourceOverrides.length > 0) {
      entries.push(resourcesEntry(objectAt(container, 'resources'), overrides.prefix, resourceOverrides));
    } else entries.push({ key, expression: celDyn(celValue(value)) });
  }
  if (overrides !== undefined && resourceOverrides.length > 0 && own(container, 'resources') === undefined) {
    entries.push(resourcesEntry(undefined, overrides.prefix, resourceOverrides));
  }
  entries.push(...replaced.filter((entry) => own(container, entry.key) === undefined));
  entries.push({ key: 'restartPolicy', expression: `${native} ? optional.of(dyn("Always")) : optional.none()`, optional: true });
  return celMap(entries);
}

/** Applied when accepted and not in conflict with its request or limit. */
function overrideApplied(prefix: string, name: ResourceOverride): string {
  const resource = RESOURCE_TARGETS[name].resource;
  return `(variables.${OVERRIDE_VARIABLES[name]} != "" && !variables.${conflictVariable(prefix, resource)})`;
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

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
