import { isJsonObject, objectAt, own, type JsonObject } from './json.js';
import { Annotations } from './names.js';

/** The Pod's `envoy-injector.io/status` read as a JSON object; undefined when it has none, or not of our JSON. */
export function readStatusAnnotation(pod: JsonObject): JsonObject | undefined {
  const status = own(objectAt(objectAt(pod, 'metadata'), 'annotations') ?? {}, Annotations.status);
  if (typeof status !== 'string') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(status);
  } catch {
    return undefined;
  }
  return isJsonObject(parsed) ? parsed : undefined;
}
