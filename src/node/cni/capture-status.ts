import { own, readStatusAnnotation, type JsonObject } from '../../injection/index.js';

/** The Pod's `envoy-injector.io/status` when it is our JSON and says CNI mode; else undefined. */
export function cniModeStatus(pod: JsonObject): JsonObject | undefined {
  const status = readStatusAnnotation(pod);
  return status !== undefined && own(status, 'captureMode') === 'cni' ? status : undefined;
}
