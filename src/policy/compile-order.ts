import { Annotations, CAPTURE_INIT_NAME, type JsonObject } from '../injection/index.js';
import { celString } from './cel-literal.js';
import { podAnnotation } from './cel-pod.js';

/**
 * The order of init containers after other injectors, in policy mode
 * (docs/design.md §14): injection/merge/init-order.ts's restoreInitOrder in CEL,
 * for a Pod the policy already injected and the API server reinvokes it on.
 * The names come from our status annotation (its JSON holds container names,
 * DNS labels: no escapes to undo), the sidecars are the restartable ones.
 */

/**
 * `"<list>":["a","b"]` of the status annotation as a list of names; [] when
 * absent. The regular expression runs once, its match bound by a
 * one-element list's `map`: CEL evaluates each occurrence of an expression
 * again (a reinvocation on every Pod we injected pays for it).
 */
function statusNames(list: string): string {
  const found = `variables.statusText.find(${listPattern(list)})`;
  const names = 'i == "" ? [] : i.split(",").map(n, n.substring(1, size(n) - 1))';
  return `[${found}].map(f, f == "" ? [] : [f.substring(${list.length + 4}, size(f) - 1)].map(i, ${names})[0])[0]`;
}

/** Longest status the condition reads: ours names a template, its hash and a few dozen entry names. */
const MAX_SETTLED_STATUS = 4096;

/** The status annotation's list of our init containers when it holds none: the JSON our status writes. */
const NO_INIT_CONTAINERS = '"initContainers":[]';

/**
 * A part of the match condition: a Pod we injected has nothing to reorder
 * (the mutation's answer would be no patch) when its status names none of
 * our init containers, or when the Pod's init containers are, by name and
 * in order, exactly those the status names (then the order wanted is the
 * order it has, whether ours are sidecars or envoy-init goes last). Such a
 * Pod is not matched at all. Most injected Pods are such, and the API
 * server reinvokes the policy on every Pod it injected (the ServiceAccount
 * plugin adds the token mount after us): so that rerun costs the condition,
 * not the mutation's activation and variables. Conservative: any status
 * whose first `initContainers` list is neither, or longer than ours can be,
 * still reaches the mutation. Container names are DNS labels, which JSON
 * writes as they are: the Pod's list is written as our status writes it.
 */
export function nothingToReorderCondition(): { name: string; expression: string } {
  const status = podAnnotation(Annotations.status);
  const found = `${status}.find(${listPattern('initContainers')})`;
  const podList = `${celString('"initContainers":[')} + (has(object.spec.initContainers) ? object.spec.initContainers.map(c, ${celString('"')} + c.name + ${celString('"')}).join(",") : "") + "]"`;
  // A status longer than ours ever is (a Pod's own, copied or made up) goes to the mutation: the condition's cost stays bounded.
  return {
    name: 'nothing-to-reorder',
    expression: `${status} == "" || size(${status}) > ${MAX_SETTLED_STATUS} || (${found} != ${celString(NO_INIT_CONTAINERS)} && ${found} != ${podList})`,
  };
}

/** The CEL regular expression of `"<list>":[...]` in the status annotation's JSON. */
function listPattern(list: string): string {
  return celString(`"${list}":\\[[^\\]]*\\]`);
}

export function orderVariables(): JsonObject[] {
  const list = 'variables.initList';
  const restartable = `${list}.exists(c, c.name == n && has(c.restartPolicy) && c.restartPolicy == "Always")`;
  const current = `${list}.map(c, c.name)`;
  const capture = celString(CAPTURE_INIT_NAME);
  return [
    { name: 'statusText', expression: `variables.annotations[?${celString(Annotations.status)}].orValue("")` },
    { name: 'initList', expression: 'has(object.spec.initContainers) ? object.spec.initContainers : []' },
    { name: 'ourInits', expression: `variables.statusText.startsWith("{") ? ${statusNames('initContainers')} : []` },
    {
      // Our status names containers the Pod lacks: not ours (copied), left alone, as the webhook leaves it.
      name: 'statusOurs',
      expression: `variables.ourInits.all(n, ${list}.exists(c, c.name == n)) && ${statusNames('containers')}.all(n, has(object.spec.containers) && object.spec.containers.exists(c, c.name == n))`,
    },
    { name: 'ourSidecarIndexes', expression: `variables.ourInits.transformList(i, n, ${restartable}, i)` },
    {
      name: 'wantedInits',
      expression:
        `size(variables.ourSidecarIndexes) > 0 ? ` +
        `variables.ourInits.transformList(i, n, i <= variables.ourSidecarIndexes.max(), n) + ${current}.filter(n, !(n in variables.ourInits.transformList(i, m, i <= variables.ourSidecarIndexes.max(), m))) : ` +
        `size(variables.ourInits) > 0 && variables.ourInits[size(variables.ourInits) - 1] == ${capture} ? ${current}.filter(n, n != ${capture}) + [${capture}] : ${current}`,
    },
    // Most Pods we injected have none of our init containers: nothing to reorder, and statusOurs is never evaluated.
    { name: 'reorder', expression: `size(variables.ourInits) > 0 && variables.statusOurs && variables.wantedInits != ${current}` },
  ];
}

/** The mutation's operations for a Pod we injected (JSONPatch exists only in mutations): the whole list reordered, or none. */
export function reorderOps(): string {
  return 'variables.reorder ? [JSONPatch{op: "add", path: "/spec/initContainers", value: variables.wantedInits.map(n, variables.initList.filter(c, c.name == n)[0])}] : []';
}
