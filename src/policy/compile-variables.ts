import { Annotations, entryName, NamespaceLabel, type JsonObject, type LabelSelector, type OverrideName, type SidecarTemplate } from '../injection/index.js';
import { captureLists, captureSharedVariables, captureTemplateVariables } from './compile-capture.js';
import { defaultContainerVariables, lifecycleProxyEntries, lifecycleSharedVariables, lifecycleTemplateVariables, safeToEvictVariables } from './compile-lifecycle.js';
import { celString, celValue, MAX_UNROLLED } from './cel-literal.js';
import { annotation, explicitRequest } from './cel-pod.js';
import { conflictVariables, containerLiteral, OVERRIDES_GIVEN, overrideVariables } from './compile-overrides.js';
import { MAX_EXPRESSION_CODE_POINTS } from './policy-limits.js';
import { orderVariables } from './compile-order.js';
import { proxyIdsEntries, proxyIdsVariables } from './compile-proxy-ids.js';
import { anySelectorCel } from './compile-selectors.js';
import { statusText } from './compile-patch.js';
import { resourcesVariables } from './compile-resources.js';
import { templateLists, templateVariable } from './template-variable.js';

/** The policy's variables: what the Pod asks for, the names it holds, the overrides, then each template's lists and status. */
export function policyVariables(
  entries: readonly SidecarTemplate[],
  defaultName: string,
  allowed: readonly OverrideName[],
  nativeDefault: boolean,
  alwaysInject?: readonly LabelSelector[],
): JsonObject[] {
  return [
    ...podVariables(defaultName, alwaysInject),
    ...proxyIdsVariables(),
    ...orderVariables(),
    ...captureSharedVariables(entries),
    ...lifecycleSharedVariables(entries),
    ...overrideVariables(allowed),
    ...entries.flatMap((template, index) => templateVariables(template, `t${index}`, allowed, nativeDefault)),
    ...resourcesVariables(entries),
  ];
}

/**
 * The variables some expression reads (`readers`: the mutation's patch), the
 * others left out: the API server builds an entry of its lazy variable map
 * for each variable on every call, read or not.
 */
export function readVariables(variables: readonly JsonObject[], readers: readonly string[]): JsonObject[] {
  let kept = [...variables];
  for (;;) {
    const text = [...kept.map((variable) => String(variable['expression'])), ...readers].join('\n');
    const read = kept.filter((variable) => new RegExp(`\\bvariables\\.${String(variable['name'])}\\b`).test(text));
    if (read.length === kept.length) return kept;
    kept = read;
  }
}

/**
 * What the Pod asks for and the names it already holds. Injected when asked
 * for, picked by an always-inject selector (never-inject ones are match
 * conditions), or in a namespace labeled enabled; its template is its own
 * annotation's, else its namespace's label's, else the default.
 */
function podVariables(defaultName: string, alwaysInject: readonly LabelSelector[] | undefined): JsonObject[] {
  const names = (field: string, fallback = false): string =>
    `(has(object.spec.${field}) ? object.spec.${field}.map(e, ${fallback ? 'has(e.name) ? e.name : ""' : 'e.name'}) : [])`;
  const namespaceLabel = (key: string, fallback: string): string =>
    `variables.namespaceLabels[?${celString(key)}].orValue(${celString(fallback)})`;
  const always = anySelectorCel(alwaysInject, 'variables.podLabels');
  return [
    { name: 'annotations', expression: 'has(object.metadata.annotations) ? object.metadata.annotations : {}' },
    // What the API server's ValidateAnnotationsSize counts of them: bytes of keys and values (compile-patch.ts, annotationsFit).
    { name: 'annotationsBytes', expression: 'variables.annotations.map(k, size(bytes(k)) + size(bytes(variables.annotations[k]))).sum()' },
    { name: 'namespaceLabels', expression: 'has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}' },
    { name: 'namespaceAnnotations', expression: 'has(namespaceObject.metadata.annotations) ? namespaceObject.metadata.annotations : {}' },
    ...(always === undefined ? [] : [{ name: 'podLabels', expression: 'has(object.metadata.labels) ? object.metadata.labels : {}' }]),
    {
      name: 'inject',
      expression: `${explicitRequest(annotation)} || ${always === undefined ? '' : `(${always}) || `}${namespaceLabel(NamespaceLabel.key, '')} == ${celString(NamespaceLabel.enabled)}`,
    },
    {
      name: 'template',
      expression: `variables.annotations[?${celString(Annotations.template)}].orValue(${namespaceLabel(NamespaceLabel.template, defaultName)})`,
    },
    // Kubernetes wants container names unique across all container lists.
    { name: 'containerNames', expression: `${names('containers')} + ${names('initContainers')} + ${names('ephemeralContainers')}` },
    { name: 'volumeNames', expression: names('volumes') },
    { name: 'pullSecretNames', expression: names('imagePullSecrets', true) },
  ];
}

/** One template's variables (`prefix` is `t<index>`): its entries the Pod lacks, and its status. */
function templateVariables(template: SidecarTemplate, prefix: string, allowed: readonly OverrideName[], nativeDefault: boolean): JsonObject[] {
  const list: JsonObject[] = [...conflictVariables(template.containers[0], prefix, allowed)];
  const add = (name: string, expression: string): void => void list.push({ name, expression });
  const nativeAnnotation = annotation(Annotations.nativeSidecar);
  add(`${prefix}Native`, template.nativeSidecar ?? nativeDefault ? `${nativeAnnotation} != "false"` : `${nativeAnnotation} == "true"`);
  list.push(...lifecycleTemplateVariables(template, prefix));
  const native = `variables.${prefix}Native`;
  const sidecar = (position: number, nativeValue: string | boolean, overridden: boolean): string => {
    const container = template.containers[position] ?? {};
    return position === 0
      ? containerLiteral(container, overridden ? { prefix, allowed } : undefined, nativeValue, [...lifecycleProxyEntries(template, prefix, String(nativeValue)), ...proxyIdsEntries(template)])
      : containerLiteral(container, undefined, nativeValue);
  };
  const entries = (literal: (position: number) => string): NamedLiteral[] => template.containers.map((container, position) => ({ name: entryName(container), literal: literal(position) }));
  add(`${prefix}Containers`, filterNew(entries((position) => containerExpression(native, position, sidecar)), 'variables.containerNames'));
  // Prepended one by one at index 0: the last first, so they keep the template's order.
  add(`${prefix}ContainersReversed`, filterNew(entries((position) => sidecar(position, native, true)).reverse(), 'variables.containerNames'));
  const taken = { InitContainers: 'variables.containerNames', Volumes: 'variables.volumeNames', PullSecrets: 'variables.pullSecretNames' } as const;
  for (const [name, entries] of Object.entries(templateLists(template)) as [keyof typeof taken, readonly JsonObject[]][]) {
    if (entries.length > 0) add(`${prefix}${name}`, filterNew(entries.map((entry) => ({ name: entryName(entry), literal: celValue(entry) })), taken[name]));
  }
  list.push(...captureTemplateVariables(template, prefix));
  const captureVolume = captureLists(template, prefix)?.volume;
  const volumes = templateVariable(template, prefix)('Volumes');
  list.push(...safeToEvictVariables(template, prefix, captureVolume === undefined ? volumes : `(${volumes} + ${captureVolume})`));
  list.push(...defaultContainerVariables(template, prefix));
  add(`${prefix}Status`, statusText(template, prefix));
  return list;
}

/**
 * A template container as the Pod gets it. Most Pods give no override: they
 * get one literal per value of tNNative, each a constant that cel-go builds
 * once when it plans the expression (its constant folding) instead of map
 * by map per Pod; the literal with the overrides is read only when one is
 * given. A container too large for three copies well under the API
 * server's expression limit keeps the one literal.
 */
function containerExpression(native: string, position: number, sidecar: (position: number, native: string | boolean, overridden: boolean) => string): string {
  const overridden = sidecar(position, native, true);
  const constant = `(${native} ? ${sidecar(position, true, false)} : ${sidecar(position, false, false)})`;
  const common = overridden === sidecar(position, native, false) ? constant : `(variables.${OVERRIDES_GIVEN} ? ${overridden} : ${constant})`;
  return [...common].length <= MAX_EXPRESSION_CODE_POINTS / 4 ? common : overridden;
}

/** A template entry's CEL literal (or expression) and its name. */
interface NamedLiteral {
  readonly name: string | undefined;
  readonly literal: string;
}

/**
 * The entries whose name is not in `taken` (the Pod's own win): a test of
 * each name, known when compiling, rather than a comprehension per Pod
 * (celMapList says why); an entry without a name keeps the comprehension.
 */
function filterNew(entries: readonly NamedLiteral[], taken: string): string {
  if (entries.length > MAX_UNROLLED || entries.some((entry) => entry.name === undefined)) return `[${entries.map((entry) => entry.literal).join(', ')}].filter(e, !(e.name in ${taken}))`;
  return `(${entries.map(({ name, literal }) => `(${celString(name ?? '')} in ${taken} ? [] : [${literal}])`).join(' + ')})`;
}
