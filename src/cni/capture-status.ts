import { Annotations, isJsonObject, objectAt, own, type JsonObject } from '../injection/index.js';

/** The Pod's `envoy-injector.io/status` when it is our JSON and says CNI mode; else undefined. */
export function cniModeStatus(pod: JsonObject): JsonObject | undefined {
  const status = own(objectAt(objectAt(pod, 'metadata'), 'annotations') ?? {}, Annotations.status);
  if (typeof status !== 'string') return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(status);
  } catch {
    return undefined;
  }
  return isJsonObject(parsed) && own(parsed, 'captureMode') === 'cni' ? parsed : undefined;
}
