import { arrayAt, isJsonObject, objectAt, own, stringAt, type JsonObject } from '../basics/index.js';

/** The node label every kubelet sets to its operating system (`linux`, `windows`). */
export const OS_LABEL = 'kubernetes.io/os';

/**
 * Why the Pod can only run on Windows nodes, or undefined when it may run on
 * Linux: its `spec.os.name` is `windows`, its nodeSelector asks for
 * `kubernetes.io/os: windows`, or every term of its required node affinity
 * does (`In` with `windows` as its only value). The proxy and envoy-init are
 * Linux containers, and the API server refuses their Linux-only fields
 * (`runAsUser`, capabilities, ...) in a Pod whose `spec.os.name` is windows.
 */
export function windowsOnly(pod: JsonObject): string | undefined {
  const spec = objectAt(pod, 'spec');
  if (stringAt(objectAt(spec, 'os'), 'name') === 'windows') return 'spec.os.name: windows';
  if (stringAt(objectAt(spec, 'nodeSelector'), OS_LABEL) === 'windows') return `its nodeSelector ${OS_LABEL}: windows`;
  const required = objectAt(objectAt(objectAt(spec, 'affinity'), 'nodeAffinity'), 'requiredDuringSchedulingIgnoredDuringExecution');
  const terms = arrayAt(required, 'nodeSelectorTerms');
  if (terms !== undefined && terms.length > 0 && terms.every(requiresWindows)) return `its required node affinity matches only ${OS_LABEL}: windows`;
  return undefined;
}

/** A node selector term (its expressions are ANDed) that only a Windows node can match. */
function requiresWindows(term: unknown): boolean {
  if (!isJsonObject(term)) return false;
  return (arrayAt(term, 'matchExpressions') ?? []).some((expression) => {
    if (!isJsonObject(expression) || own(expression, 'key') !== OS_LABEL || own(expression, 'operator') !== 'In') return false;
    const values = arrayAt(expression, 'values') ?? [];
    return values.length > 0 && values.every((value) => value === 'windows');
  });
}
