import { Annotations, isJsonObject, objectAt, own, type JsonObject } from '../basics/index.js';

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

/**
 * Why a status annotation cannot be one this injector wrote into this Pod
 * (not its JSON, or naming containers the Pod lacks); undefined when it can.
 * The webhook adds the containers and the status in one patch, so a Pod that
 * has the status has them, on reinvocation and retries alike.
 */
export function copiedStatusProblem(status: unknown, pod: JsonObject): string | undefined {
  let parsed: unknown;
  try {
    parsed = typeof status === 'string' ? JSON.parse(status) : undefined;
  } catch {
    parsed = undefined;
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return 'not the JSON the injector writes';
  const spec = objectAt(pod, 'spec');
  const present = new Set(
    ['containers', 'initContainers'].flatMap((list) => {
      const entries = spec === undefined ? undefined : own(spec, list);
      return Array.isArray(entries) ? entries.map((entry) => (entry !== null && typeof entry === 'object' && !Array.isArray(entry) ? own(entry, 'name') : undefined)) : [];
    }),
  );
  const named = ['containers', 'initContainers'].flatMap((list) => {
    const names = own(parsed as JsonObject, list);
    return Array.isArray(names) ? names.filter((name): name is string => typeof name === 'string') : [];
  });
  const missing = named.filter((name) => !present.has(name));
  return missing.length === 0 ? undefined : `it names containers the Pod does not have (${missing.map((name) => `"${name}"`).join(', ')})`;
}
