import { Annotations, type JsonObject, type LabelSelector } from '../injection/index.js';
import { celString, celValue } from './cel-literal.js';
import { explicitRequest, podAnnotation } from './cel-pod.js';
import { anySelectorCel, POD_LABELS } from './compile-selectors.js';

/**
 * What the Pod alone decides (docs/design.md §4 rules 4, 4a, 6, 7 and the
 * Pod's template): before any variable is evaluated. The namespace's
 * template is the mutation's (namespaceObject is only given to mutations).
 */
export function matchConditions(templateNames: readonly string[], defaultName: string, neverInject?: readonly LabelSelector[]): JsonObject[] {
  const never = anySelectorCel(neverInject, POD_LABELS);
  return [
    { name: 'not-opted-out', expression: `${podAnnotation(Annotations.inject)} != "false"` },
    ...(never === undefined ? [] : [{ name: 'not-never-selected', expression: `${explicitRequest((key) => podAnnotation(key))} || !(${never})` }]),
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
