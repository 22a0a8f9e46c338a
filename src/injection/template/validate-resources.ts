import { compareQuantities, isJsonObject, own, parseQuantity, type JsonValue, type Quantity } from '../basics/index.js';
import type { ProblemList } from './entry-checks.js';

/**
 * A container's `resources` as the API server's ValidateResourceRequirements
 * sees them (quantity syntax and types are the schema check's): names of
 * standard or extended resources, requests within limits, and resources that
 * cannot be overcommitted (extended ones, hugepages) with request = limit.
 */
export function checkResources(resources: JsonValue | undefined, path: string, problems: ProblemList): void {
  if (!isJsonObject(resources)) return;
  const parsed = { limits: new Map<string, Quantity>(), requests: new Map<string, Quantity>() };
  for (const kind of ['limits', 'requests'] as const) {
    const amounts = own(resources, kind);
    if (!isJsonObject(amounts)) continue;
    for (const [resource, amount] of Object.entries(amounts)) {
      const namePath = `${path}.${kind}.${resource}`;
      const nameProblem = resourceNameProblem(resource);
      if (nameProblem !== undefined) problems.add(namePath, nameProblem);
      const quantity = typeof amount === 'string' || typeof amount === 'number' ? parseQuantity(amount) : undefined;
      if (quantity === undefined) continue;
      parsed[kind].set(resource, quantity);
      if (nameProblem === undefined && isExtended(resource) && quantity.numerator % quantity.denominator !== 0n) {
        problems.add(namePath, 'must be a whole number (an extended resource is counted in units)');
      }
      const pageSize = hugePageSize(resource);
      if (pageSize === undefined) continue;
      if (pageSize.numerator <= 0n) problems.add(namePath, `"${resource}" must name a page size, such as hugepages-2Mi`);
      else if ((quantity.numerator * pageSize.denominator) % (pageSize.numerator * quantity.denominator) !== 0n) {
        problems.add(namePath, `must be a multiple of the page size ${resource.slice('hugepages-'.length)}`);
      }
    }
  }
  for (const [resource, request] of parsed.requests) {
    const limit = parsed.limits.get(resource);
    const overcommit = !isExtended(resource) && hugePageSize(resource) === undefined;
    if (limit === undefined) {
      if (!overcommit) problems.add(`${path}.limits.${resource}`, `required: ${resource} cannot be overcommitted, give a limit equal to the request`);
    } else if (!overcommit && compareQuantities(request, limit) !== 0) {
      problems.add(`${path}.requests.${resource}`, `must be equal to the limit (${resource} cannot be overcommitted)`);
    } else if (compareQuantities(request, limit) > 0) {
      problems.add(`${path}.requests.${resource}`, 'must be less than or equal to the limit');
    }
  }
  const all = [...parsed.limits.keys(), ...parsed.requests.keys()];
  if (all.some((resource) => hugePageSize(resource) !== undefined) && !all.some((resource) => resource === 'cpu' || resource === 'memory')) {
    problems.add(path, 'hugepages require a cpu or memory request or limit');
  }
}

const STANDARD = new Set(['cpu', 'memory', 'ephemeral-storage']);
/** A qualified name: an optional DNS subdomain prefix and `/`, then 1-63 alphanumerics, '-', '_' or '.'. */
const QUALIFIED_NAME = /^(?:([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)\/)?([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)$/;

/** Why `name` is no container resource name, or undefined (validateContainerResourceName). */
function resourceNameProblem(name: string): string | undefined {
  const match = QUALIFIED_NAME.exec(name);
  if (match === null || (match[1]?.length ?? 0) > 253 || (match[5]?.length ?? 0) > 63) {
    return `"${name}" is not a resource name (cpu, memory, ephemeral-storage, hugepages-<size>, or an extended resource domain/name)`;
  }
  if (!name.includes('/')) {
    return STANDARD.has(name) || name.startsWith('hugepages-') ? undefined : `"${name}" is not a standard resource for containers (cpu, memory, ephemeral-storage, hugepages-<size>); an extended resource is domain/name`;
  }
  if (isNative(name)) return undefined;
  return name.startsWith('requests.') ? `"${name}" must not start with requests.` : undefined;
}

/** kubernetes.io/ names are the cluster's own (native); other domain/name resources are extended. */
function isNative(name: string): boolean {
  return !name.includes('/') || name.includes('kubernetes.io/');
}

function isExtended(name: string): boolean {
  return !isNative(name) && !name.startsWith('requests.');
}

/** The page size of a `hugepages-<size>` resource, or undefined for other names. */
function hugePageSize(name: string): Quantity | undefined {
  return name.startsWith('hugepages-') ? parseQuantity(name.slice('hugepages-'.length)) ?? { numerator: 0n, denominator: 1n } : undefined;
}
