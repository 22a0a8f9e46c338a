import { Annotations, OS_LABEL, OTHER_MESHES, type JsonObject, type LabelSelector } from '../injection/index.js';
import { celString, celValue } from './cel-literal.js';
import { explicitRequest, podAnnotation } from './cel-pod.js';
import { nothingToReorderCondition } from './compile-order.js';
import { anySelectorCel, POD_LABELS } from './compile-selectors.js';

/** The policy's one match condition; its parts (matchConditionParts) are named in it, and by `explain`. */
export const MATCH_CONDITION = 'may-be-injected';

/**
 * The policy's match condition: its parts joined by `&&`, each after a CEL
 * comment naming it. One condition rather than one per part: the API server
 * runs each condition as a program of its own (planned, its cost tracked),
 * for every Pod the binding matches and again in each reinvocation.
 */
export function matchConditions(templateNames: readonly string[], defaultName: string, neverInject?: readonly LabelSelector[]): JsonObject[] {
  const parts = matchConditionParts(templateNames, defaultName, neverInject);
  return [{ name: MATCH_CONDITION, expression: parts.map(({ name, expression }) => `// ${name}\n(${expression})`).join('\n&& ') }];
}

export interface MatchConditionPart {
  readonly name: string;
  readonly expression: string;
}

/**
 * What the Pod alone decides (docs/design.md §4 rules 4, 4a, 6, 6a and the
 * Pod's template): before any variable is evaluated. The namespace's
 * template is the mutation's (namespaceObject is only given to mutations).
 * First, a Pod we injected with nothing to reorder (compile-order.ts): the
 * reinvocation that follows every injection stops there.
 */
export function matchConditionParts(templateNames: readonly string[], defaultName: string, neverInject?: readonly LabelSelector[]): MatchConditionPart[] {
  const never = anySelectorCel(neverInject, POD_LABELS);
  return [
    nothingToReorderCondition(),
    { name: 'not-opted-out', expression: `${podAnnotation(Annotations.inject)} != "false"` },
    ...(never === undefined ? [] : [{ name: 'not-never-selected', expression: `${explicitRequest((key) => podAnnotation(key))} || !(${never})` }]),
    {
      name: 'not-host-network',
      expression: `!has(object.spec.hostNetwork) || !object.spec.hostNetwork || ${explicitRequest((key) => podAnnotation(key))}`,
    },
    { name: 'not-windows', expression: notWindows() },
    { name: 'not-other-mesh', expression: notOtherMesh() },
    {
      name: 'known-template',
      expression: `${podAnnotation(Annotations.template, defaultName)} in ${celValue([...templateNames])}`,
    },
  ];
}

/**
 * As the webhook's other-mesh rule (injection/decision/other-meshes.ts): no mark of
 * another mesh's injection, unless the Pod carries our status (rule 7 comes
 * first: the mutation restores its order, as the webhook does).
 */
function notOtherMesh(): string {
  const keys = (field: 'annotations' | 'labels'): string[] => OTHER_MESHES.flatMap((mesh) => mesh[field]);
  const names = celValue([...new Set(OTHER_MESHES.flatMap((mesh) => mesh.containers))]);
  const metadata = (field: 'annotations' | 'labels'): string[] =>
    keys(field).length === 0 ? [] : [`(has(object.metadata.${field}) && ${celValue(keys(field))}.exists(k, k in object.metadata.${field}))`];
  const marks = [
    ...metadata('annotations'),
    ...metadata('labels'),
    ...['containers', 'initContainers'].map((list) => `(has(object.spec.${list}) && object.spec.${list}.exists(c, c.name in ${names}))`),
  ];
  const status = celString(Annotations.status);
  const ours = `(has(object.metadata.annotations) && ${status} in object.metadata.annotations && object.metadata.annotations[${status}] != "")`;
  return `${ours} || !(${marks.join(' || ')})`;
}

/** As the webhook's windows rule (injection/decision/pod-os.ts): spec.os.name, the nodeSelector, every required node affinity term. */
function notWindows(): string {
  const spec = 'object.spec';
  const os = celString(OS_LABEL);
  const required = `${spec}.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`;
  const terms = `${required}.nodeSelectorTerms`;
  const term = `has(t.matchExpressions) && t.matchExpressions.exists(e, e.key == ${os} && e.operator == "In" && has(e.values) && size(e.values) > 0 && e.values.all(v, v == "windows"))`;
  return [
    `!(has(${spec}.os) && ${spec}.os.name == "windows")`,
    `!(has(${spec}.nodeSelector) && ${os} in ${spec}.nodeSelector && ${spec}.nodeSelector[${os}] == "windows")`,
    `!(has(${spec}.affinity) && has(${spec}.affinity.nodeAffinity) && has(${required}) && has(${terms}) && size(${terms}) > 0 && ${terms}.all(t, ${term}))`,
  ].join(' && ');
}
