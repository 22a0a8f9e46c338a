import { Annotations, type JsonObject } from '../injection/index.js';
import { celString, celValue } from './cel-literal.js';
import { explicitRequest, podAnnotation } from './cel-pod.js';

/** What the Pod alone decides (docs/design.md §4 rules 4, 6, 7 and the template): before any variable is evaluated. */
export function matchConditions(templateNames: readonly string[], defaultName: string): JsonObject[] {
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
