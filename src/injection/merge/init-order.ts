import { arrayAt, entryName, isJsonObject, jsonPointer, objectAt, own, type JsonObject } from '../basics/index.js';
import { CAPTURE_CHECK_NAME, CAPTURE_INIT_NAME } from '../template/index.js';
import { readStatusAnnotation } from '../decision/index.js';
import type { PatchOperation } from './inject-pod.js';

/**
 * The order of init containers an injected Pod needs, whatever another
 * webhook did after us (docs/design.md §14): with native sidecars, what our
 * patch put first (envoy-init when capturing, then the proxy and the other
 * sidecars) stays first, so no init container runs before the rules have a
 * proxy behind them, or before the proxy is up; with classic ones, envoy-init
 * stays last, so no init container runs after the rules without a proxy
 * (which starts only after every init container); CNI mode's check, in its
 * place, stays last too. Read from the Pod alone: our
 * status names what we added (`initContainers`: first those put first, then
 * those appended), and the restartable ones are the sidecars. Returns the
 * patch that restores it (the whole list, reordered), or none when the order
 * is right: a second look at its result changes nothing.
 */
export function restoreInitOrder(pod: JsonObject): PatchOperation[] {
  const ours = statusInitContainers(pod);
  const list = arrayAt(objectAt(pod, 'spec'), 'initContainers');
  if (ours === undefined || ours.length === 0 || list === undefined) return [];
  const entries = list.filter(isJsonObject);
  const byName = new Map(entries.map((entry) => [entryName(entry), entry]));
  const restartable = (name: string): boolean => own(byName.get(name) ?? {}, 'restartPolicy') === 'Always';
  const lastSidecar = ours.map(restartable).lastIndexOf(true);
  let wanted: JsonObject[];
  if (lastSidecar >= 0) {
    const lead = ours.slice(0, lastSidecar + 1).filter((name) => byName.has(name));
    const leading = lead.map((name) => byName.get(name)).filter(isJsonObject);
    wanted = [...leading, ...entries.filter((entry) => !lead.includes(entryName(entry) ?? ''))];
  } else {
    const last = ours.at(-1);
    const capture = last === CAPTURE_INIT_NAME || last === CAPTURE_CHECK_NAME ? byName.get(last) : undefined;
    if (capture === undefined) return [];
    wanted = [...entries.filter((entry) => entry !== capture), capture];
  }
  if (wanted.every((entry, index) => entry === entries[index]) && wanted.length === list.length) return [];
  return [{ op: 'add', path: jsonPointer('spec', 'initContainers'), value: wanted }];
}

/** The init containers our status annotation names, or undefined when the Pod has none of our JSON. */
function statusInitContainers(pod: JsonObject): string[] | undefined {
  const parsed = readStatusAnnotation(pod);
  if (parsed === undefined) return undefined;
  const names = own(parsed, 'initContainers');
  return Array.isArray(names) ? names.filter((name): name is string => typeof name === 'string') : undefined;
}
