import { Annotations, NamespaceLabel, type JsonObject, type LabelSelector, type OverrideName, type SidecarTemplate } from '../injection/index.js';
import { captureLists, captureSharedVariables, captureTemplateVariables } from './compile-capture.js';
import { defaultContainerVariables, lifecycleProxyEntries, lifecycleSharedVariables, lifecycleTemplateVariables, safeToEvictVariables } from './compile-lifecycle.js';
import { celString, celValue } from './cel-literal.js';
import { annotation, explicitRequest } from './cel-pod.js';
import { conflictVariables, containerLiteral, overrideVariables } from './compile-overrides.js';
import { orderVariables } from './compile-order.js';
import { anySelectorCel } from './compile-selectors.js';
import { statusText } from './compile-patch.js';
import { resourcesVariables } from './compile-resources.js';

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
    ...orderVariables(),
    ...captureSharedVariables(entries),
    ...lifecycleSharedVariables(entries),
    ...overrideVariables(allowed),
    ...entries.flatMap((template, index) => templateVariables(template, `t${index}`, allowed, nativeDefault)),
    ...resourcesVariables(entries),
  ];
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
    { name: 'namespaceLabels', expression: 'has(namespaceObject.metadata.labels) ? namespaceObject.metadata.labels : {}' },
    { name: 'namespaceAnnotations', expression: 'has(namespaceObject.metadata.annotations) ? namespaceObject.metadata.annotations : {}' },
    ...(always === undefined ? [] : [{ name: 'podLabels', expression: 'has(object.metadata.labels) ? object.metadata.labels : {}' }]),
    { name: 'explicit', expression: explicitRequest(annotation) },
    {
      name: 'inject',
      expression: `variables.explicit || ${always === undefined ? '' : `(${always}) || `}${namespaceLabel(NamespaceLabel.key, '')} == ${celString(NamespaceLabel.enabled)}`,
    },
    {
      name: 'template',
      expression: `variables.annotations[?${celString(Annotations.template)}].orValue(${namespaceLabel(NamespaceLabel.template, defaultName)})`,
    },
    { name: 'nativeAnnotation', expression: annotation(Annotations.nativeSidecar) },
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
  add(`${prefix}Native`, template.nativeSidecar ?? nativeDefault ? 'variables.nativeAnnotation != "false"' : 'variables.nativeAnnotation == "true"');
  list.push(...lifecycleTemplateVariables(template, prefix));
  const native = `variables.${prefix}Native`;
  const sidecars = template.containers.map((container, position) =>
    position === 0 ? containerLiteral(container, { prefix, allowed }, native, lifecycleProxyEntries(template, prefix, native)) : containerLiteral(container, undefined, native),
  );
  add(`${prefix}Containers`, filterNew(sidecars, 'variables.containerNames'));
  // Prepended one by one at index 0: the last first, so they keep the template's order.
  add(`${prefix}ContainersReversed`, filterNew([...sidecars].reverse(), 'variables.containerNames'));
  add(`${prefix}InitContainers`, filterNew(template.initContainers.map((entry) => celValue(entry)), 'variables.containerNames'));
  add(`${prefix}Volumes`, filterNew(template.volumes.map((entry) => celValue(entry)), 'variables.volumeNames'));
  add(`${prefix}PullSecrets`, filterNew(template.imagePullSecrets.map((entry) => celValue(entry)), 'variables.pullSecretNames'));
  list.push(...captureTemplateVariables(template, prefix));
  const captureVolume = captureLists(template, prefix)?.volume;
  list.push(...safeToEvictVariables(template, prefix, captureVolume === undefined ? `variables.${prefix}Volumes` : `(variables.${prefix}Volumes + ${captureVolume})`));
  list.push(...defaultContainerVariables(template, prefix));
  add(`${prefix}Status`, statusText(template, prefix));
  return list;
}

/** The entries of `literals` whose name is not in `taken` (the Pod's own win). */
function filterNew(literals: readonly string[], taken: string): string {
  return literals.length === 0 ? '[]' : `[${literals.join(', ')}].filter(e, !(e.name in ${taken}))`;
}
