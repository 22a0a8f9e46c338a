import { objectAt, OpenShiftAnnotation, type JsonObject } from '../basics/index.js';

/**
 * The proxy's user and group from the namespace's OpenShift ranges
 * (docs/design.md §11, "The proxy's uid from the namespace", issue 53).
 * OpenShift gives every namespace a block of user ids and one of groups, as
 * annotations its namespace controller writes; its default SCC,
 * `restricted-v2`, refuses a container whose `runAsUser` is outside the
 * block and gives a container without one the block's first id. The proxy
 * takes the block's last id (Istio's rule, `GetProxyIDs` in its
 * pkg/kube/inject): apart from the apps, which get the first, so the capture
 * rules' owner match never lets an app's traffic past the proxy. Pure.
 */

/** The largest user or group id Kubernetes accepts in a securityContext (int32). */
export const MAX_POD_ID = 2_147_483_647;

/** A block of ids, both ends included. */
export interface IdBlock {
  readonly first: number;
  readonly last: number;
}

/** Where a Pod's proxy ids come from: the namespace's ranges. */
export interface NamespaceProxyIds {
  /** The proxy's runAsUser, the rules' `--proxy-uid`: the uid range's last id. */
  readonly uid: number;
  /** The proxy's runAsGroup: the first group block's last id, else the uid range's (OpenShift's own fallback). */
  readonly gid: number;
  /** CNI mode's check: the id below the proxy's, in the range too and never the proxy's (its traffic would pass uncaptured). */
  readonly checkUid: number;
  /** The uid range as the namespace gives it, for messages. */
  readonly uidRange: string;
}

export interface NamespaceIdsOutcome {
  /** Undefined without a usable uid range: the template's uid applies. */
  readonly ids: NamespaceProxyIds | undefined;
  /** The namespace carries a uid range at all (usable or not): an OpenShift project, where `auto` captures in CNI mode. */
  readonly openshift: boolean;
  readonly warnings: readonly string[];
}

/** The two notations, as RE2 patterns too: policy mode's CEL matches the very same (policy/compile-proxy-ids.ts). */
export const ID_BLOCK_SLASH_PATTERN = '^([0-9]{1,10})/([0-9]{1,10})$';
export const ID_BLOCK_DASH_PATTERN = '^([0-9]{1,10})-([0-9]{1,10})$';
const SLASH = new RegExp(ID_BLOCK_SLASH_PATTERN);
const DASH = new RegExp(ID_BLOCK_DASH_PATTERN);

/**
 * One block of OpenShift's notation (library-go's `uid.ParseBlock`):
 * `<first>/<size>` (what its controller writes) or `<first>-<last>`; a
 * string saying why when it is none.
 */
export function parseIdBlock(text: string): IdBlock | string {
  const slash = SLASH.exec(text);
  const dash = slash === null ? DASH.exec(text) : null;
  if (slash === null && dash === null) return 'is not "<first>/<size>" or "<first>-<last>"';
  const first = Number((slash ?? dash)?.[1]);
  const second = Number((slash ?? dash)?.[2]);
  if (slash !== null && second === 0) return 'has a size of 0: it holds no id';
  const last = slash !== null ? first + second - 1 : second;
  if (last < first) return 'ends before it starts';
  if (last > MAX_POD_ID) return `ends past ${MAX_POD_ID}, the largest id Kubernetes accepts`;
  return { first, last };
}

/**
 * The proxy's ids from the namespace's annotations (undefined: none known).
 * A malformed or too small range is a warning and the template's uid, never
 * a refused Pod: the namespace's SCC will say what it accepts.
 */
export function namespaceProxyIds(namespace: string, annotations: Readonly<Record<string, string>> | undefined): NamespaceIdsOutcome {
  const range = annotations === undefined || !Object.hasOwn(annotations, OpenShiftAnnotation.uidRange) ? undefined : annotations[OpenShiftAnnotation.uidRange];
  if (range === undefined) return { ids: undefined, openshift: false, warnings: [] };
  const where = `namespace "${namespace}" annotation ${OpenShiftAnnotation.uidRange}: ${JSON.stringify(range)}`;
  const fallback = "the proxy runs as the template's uid, which the namespace's SCC may refuse";
  const block = parseIdBlock(range);
  if (typeof block === 'string') return { ids: undefined, openshift: true, warnings: [`${where} ${block}; ${fallback}`] };
  // Two ids at least, the lower one not root: one for the proxy, another for the check (runAsNonRoot).
  if (block.last - block.first < 1 || block.last - 1 < 1) {
    return { ids: undefined, openshift: true, warnings: [`${where} holds fewer than two ids above 0 (the proxy needs one of its own, apart from the apps' and the check's); ${fallback}`] };
  }
  const warnings: string[] = [];
  const gid = groupOf(namespace, annotations, block, warnings);
  return { ids: { uid: block.last, gid, checkUid: block.last - 1, uidRange: range }, openshift: true, warnings };
}

/** The first block of the supplemental groups' last id; the uid range's last without the annotation, or with a bad one (a warning). */
function groupOf(namespace: string, annotations: Readonly<Record<string, string>> | undefined, uids: IdBlock, warnings: string[]): number {
  const groups = annotations === undefined || !Object.hasOwn(annotations, OpenShiftAnnotation.supplementalGroups) ? undefined : annotations[OpenShiftAnnotation.supplementalGroups];
  if (groups === undefined) return uids.last;
  const block = parseIdBlock(groups.split(',')[0] ?? '');
  if (typeof block !== 'string') return block.last;
  warnings.push(`namespace "${namespace}" annotation ${OpenShiftAnnotation.supplementalGroups}: ${JSON.stringify(groups)}: its first block ${block}; the proxy's group is the uid range's last id, ${uids.last}`);
  return uids.last;
}

/**
 * The proxy container running as the namespace's ids: its template's user
 * and group replaced (the SCC refuses any outside the range), set when the
 * template has none (the rules' owner match must be the proxy's real uid).
 */
export function withProxyIds(container: JsonObject, ids: NamespaceProxyIds): JsonObject {
  return { ...container, securityContext: { ...objectAt(container, 'securityContext'), runAsUser: ids.uid, runAsGroup: ids.gid } };
}
