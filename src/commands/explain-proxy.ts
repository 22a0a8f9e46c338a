import {
  ALL_OVERRIDES,
  entryName,
  isJsonObject,
  objectAt,
  overrideField,
  own,
  stringAt,
  type ManifestReport,
} from '../injection/index.js';

/** One value of the injected proxy and where it came from. */
export interface ProxyValue {
  /** `image`, `resources.requests.cpu`, ... */
  readonly field: string;
  readonly value: string;
  /** The Pod's own annotation, its namespace's (the proxy-* defaults, OpenShift's id ranges), or the template. */
  readonly source: 'pod' | 'namespace' | 'template';
}

/** The proxy's overridable values as injected, each with its source; empty when no proxy of ours was injected. */
export function proxyValues(report: ManifestReport): ProxyValue[] {
  const { decision, injection, injected } = report;
  if (!decision.inject || injection === undefined) return [];
  const proxyName = entryName(decision.template.containers[0]);
  if (proxyName === undefined || !injection.status.containers.concat(injection.status.initContainers).includes(proxyName)) return [];
  const spec = objectAt(injected, 'spec');
  const lists = ['containers', 'initContainers'].flatMap((list) => {
    const entries = spec === undefined ? undefined : own(spec, list);
    return Array.isArray(entries) ? entries : [];
  });
  const proxy = lists.find((entry) => isJsonObject(entry) && entryName(entry) === proxyName);
  if (!isJsonObject(proxy)) return [];
  // The proxy's user and group, when its namespace's OpenShift ranges gave them (the status records the uid).
  const context = objectAt(proxy, 'securityContext');
  const ids: ProxyValue[] = injection.status.proxyUid === undefined
    ? []
    : (['runAsUser', 'runAsGroup'] as const).map((field) => ({ field: `securityContext.${field}`, value: String(own(context ?? {}, field)), source: 'namespace' as const }));
  return [...ids, ...ALL_OVERRIDES.flatMap((name): ProxyValue[] => {
    const field = overrideField(name);
    const [first, kind, resource] = field.split('.');
    const value = first === 'image' ? stringAt(proxy, 'image') : quantityText(own(objectAt(objectAt(proxy, 'resources'), kind ?? '') ?? {}, resource ?? ''));
    if (value === undefined) return [];
    const override = report.overrides.find((applied) => applied.field === field);
    return [{ field, value, source: override?.source ?? 'template' }];
  })];
}

function quantityText(value: unknown): string | undefined {
  return typeof value === 'string' ? value : typeof value === 'number' ? String(value) : undefined;
}

/** `from the Pod`, `from namespace "shop"`, `from the template`. */
export function describeSource(source: ProxyValue['source'], namespace: string): string {
  return source === 'pod' ? "the Pod's annotation" : source === 'namespace' ? `namespace "${namespace}"'s annotation` : 'the template';
}
