import { Annotations } from '../injection/index.js';
import { celString } from './cel-literal.js';

/** CEL reads of the Pod's annotations, shared by the match conditions and the variables. */

/** `object.metadata.annotations[key]`, or `fallback` when there is none (where `variables` are not yet defined). */
export function podAnnotation(key: string, fallback = ''): string {
  return `(has(object.metadata.annotations) ? object.metadata.annotations[?${celString(key)}].orValue(${celString(fallback)}) : ${celString(fallback)})`;
}

/** The same read through the `annotations` variable. */
export function annotation(key: string, fallback = ''): string {
  return `variables.annotations[?${celString(key)}].orValue(${celString(fallback)})`;
}

/** Asked for by the Pod itself: `inject: "true"` or the seed's annotation (only reached when not `"false"`). */
export function explicitRequest(read: (key: string) => string): string {
  return `${read(Annotations.inject)} == "true" || ${read(Annotations.legacyInject)} == "true"`;
}
