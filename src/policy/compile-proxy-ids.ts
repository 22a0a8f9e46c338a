import {
  ID_BLOCK_DASH_PATTERN,
  ID_BLOCK_SLASH_PATTERN,
  MAX_POD_ID,
  objectAt,
  OpenShiftAnnotation,
  type JsonObject,
  type SidecarTemplate,
} from '../injection/index.js';
import { celDyn, celMap, celString, celValue, type CelMapEntry } from './cel-literal.js';

/**
 * The proxy's ids from the namespace's OpenShift ranges in policy mode
 * (docs/design.md §11): namespaceProxyIds of injection/traffic/proxy-ids.ts
 * in CEL, over the namespace object the policy sees, with the same patterns
 * and bounds. `variables.proxyIds` is `[uid, gid, checkUid]`, or `[]` where
 * the namespace has no usable range (the template's ids then, as the
 * webhook; a policy has no warnings to say why).
 */

export const PROXY_IDS = 'variables.proxyIds';
/** True where the namespace's ids apply. */
export const PROXY_IDS_KNOWN = `size(${PROXY_IDS}) == 3`;

/** CEL: the block TEXT (a string expression) holds, `[first, last]`, or `[]` when it is none (parseIdBlock). */
function blockCel(text: string): string {
  const part = (separator: string, index: number): string => `int(${text}.split(${celString(separator)})[${index}])`;
  const slash = `(${part('/', 1)} == 0 ? [] : [${part('/', 0)}, ${part('/', 0)} + ${part('/', 1)} - 1])`;
  const dash = `[${part('-', 0)}, ${part('-', 1)}]`;
  return `(${text}.matches(${celString(ID_BLOCK_SLASH_PATTERN)}) ? ${slash} : ${text}.matches(${celString(ID_BLOCK_DASH_PATTERN)}) ? ${dash} : [])`;
}

const usable = (block: string): string => `size(${block}) == 2 && ${block}[0] <= ${block}[1] && ${block}[1] <= ${MAX_POD_ID}`;

/** The shared variables: the two blocks, whether the namespace has a uid range at all (`auto` turns to CNI mode), and the ids. */
export function proxyIdsVariables(): JsonObject[] {
  const annotation = (key: string): string => `variables.namespaceAnnotations[?${celString(key)}]`;
  const uids = 'variables.proxyUidBlock';
  const groups = 'variables.proxyGroupBlock';
  return [
    { name: 'namespaceUidRange', expression: `${annotation(OpenShiftAnnotation.uidRange)}.hasValue()` },
    { name: 'proxyUidBlock', expression: blockCel(`${annotation(OpenShiftAnnotation.uidRange)}.orValue("")`) },
    { name: 'proxyGroupBlock', expression: blockCel(`${annotation(OpenShiftAnnotation.supplementalGroups)}.orValue("").split(",")[0]`) },
    {
      name: 'proxyIds',
      // Two ids at least, the lower not root (namespaceProxyIds' rule).
      expression: `${usable(uids)} && ${uids}[1] - ${uids}[0] >= 1 && ${uids}[1] - 1 >= 1 ? [${uids}[1], ${usable(groups)} ? ${groups}[1] : ${uids}[1], ${uids}[1] - 1] : []`,
    },
  ];
}

/** A securityContext CONTEXT (the template's, or none) with runAsUser and runAsGroup the namespace's where known: as withProxyIds. */
function contextWithIds(context: JsonObject | undefined, uid: string, gid: string): string {
  const entries: CelMapEntry[] = Object.entries(context ?? {})
    .filter(([key]) => key !== 'runAsUser' && key !== 'runAsGroup')
    .map(([key, value]) => ({ key, expression: celDyn(celValue(value)) }));
  return celMap([...entries, { key: 'runAsUser', expression: celDyn(uid) }, { key: 'runAsGroup', expression: celDyn(gid) }]);
}

/** The proxy container's securityContext entry: the namespace's ids where known, else the template's (none when it has none). */
export function proxyIdsEntries(template: SidecarTemplate): CelMapEntry[] {
  const context = objectAt(template.containers[0], 'securityContext');
  const withIds = celDyn(contextWithIds(context, `${PROXY_IDS}[0]`, `${PROXY_IDS}[1]`));
  if (context === undefined) return [{ key: 'securityContext', expression: `${PROXY_IDS_KNOWN} ? optional.of(${withIds}) : optional.none()`, optional: true }];
  return [{ key: 'securityContext', expression: `${PROXY_IDS_KNOWN} ? ${withIds} : ${celDyn(celValue(context))}` }];
}

/** The check container's securityContext: its uid and group the namespace's where known (captureCheckContainer with ids). */
export function checkContextExpression(context: JsonObject): string {
  const withIds = contextWithIds(context, `${PROXY_IDS}[2]`, `${PROXY_IDS}[1]`);
  return celDyn(`${PROXY_IDS_KNOWN} ? ${celDyn(withIds)} : ${celDyn(celValue(context))}`);
}

/** The rule script's `--proxy-uid=` argument: the namespace's uid where known, else the template's. */
export function proxyUidArgExpression(templateUid: number): string {
  return `"--proxy-uid=" + (${PROXY_IDS_KNOWN} ? string(${PROXY_IDS}[0]) : ${celString(String(templateUid))})`;
}

/** The status's `,"proxyUid":N` where the namespace's uid applies (inject-pod.ts writes it after captureMode). */
export function statusProxyUid(): string {
  return `(${PROXY_IDS_KNOWN} ? ${celString(',"proxyUid":')} + string(${PROXY_IDS}[0]) : "")`;
}
