import {
  Annotations,
  captureLockVolume,
  DEFAULT_GRACE_SECONDS,
  drainScriptHead,
  entryName,
  EXIT_MARGIN_SECONDS,
  execHook,
  localVolumeNames,
  objectAt,
  own,
  startupProbe,
  waitReadyScript,
  type JsonObject,
  type SidecarTemplate,
} from '../injection/index.js';
import { celDyn, celMap, celString, celValue, type CelMapEntry } from './cel-literal.js';

/**
 * The proxy's part in the Pod's life in policy mode (docs/design.md §13):
 * decideLifecycle, applyLifecycle and the autoscaler annotation of the
 * webhook, in CEL. The hooks are the webhook's own scripts; only the drain's
 * number is an expression, as the Pod's grace period shortens it.
 */

/** The variable the hold decision of every template reads. */
export function lifecycleSharedVariables(entries: readonly SidecarTemplate[]): JsonObject[] {
  const list: JsonObject[] = [];
  if (entries.some((template) => template.proxyLifecycle !== undefined)) {
    list.push({ name: 'holdAnnotation', expression: `variables.annotations[?${celString(Annotations.holdApplication)}].orValue("")` });
  }
  if (entries.some((template) => safeToEvictCandidates(template).length > 0)) {
    // The Pod's own list: its value, and the names in it (as safeToEvictValue reads them).
    list.push({ name: 'evictOwn', expression: `variables.annotations[?${celString(Annotations.safeToEvictLocalVolumes)}]` });
    list.push({ name: 'evictListed', expression: 'variables.evictOwn.hasValue() ? variables.evictOwn.value().split(",").map(n, n.trim()).filter(n, n != "") : []' });
  }
  return list;
}

/** One template's hold and drain (`prefix` is `t<index>`); none for a template without proxyLifecycle. */
export function lifecycleTemplateVariables(template: SidecarTemplate, prefix: string): JsonObject[] {
  const settings = template.proxyLifecycle;
  if (settings === undefined) return [];
  const grace = 'object.spec.terminationGracePeriodSeconds';
  const fits = `(variables.${prefix}Grace - ${EXIT_MARGIN_SECONDS} > 0 ? variables.${prefix}Grace - ${EXIT_MARGIN_SECONDS} : 0)`;
  return [
    // An annotation other than "true"/"false" is ignored, as the webhook ignores it (with a warning).
    { name: `${prefix}Hold`, expression: `variables.holdAnnotation == "true" || (variables.holdAnnotation != "false" && ${String(settings.holdApplication)})` },
    { name: `${prefix}Grace`, expression: `has(${grace}) && ${grace} >= 0 ? ${grace} : ${DEFAULT_GRACE_SECONDS}` },
    { name: `${prefix}Drain`, expression: `${settings.drainSeconds} <= ${fits} ? ${settings.drainSeconds} : ${fits}` },
  ];
}

/**
 * The proxy's entries that the lifecycle sets: a startupProbe (native,
 * holding) and the hooks (classic), each only where the template's proxy has
 * none of its own. They replace or join the container literal's entries.
 */
export function lifecycleProxyEntries(template: SidecarTemplate, prefix: string, native: string): CelMapEntry[] {
  const settings = template.proxyLifecycle;
  const proxy = template.containers[0];
  if (settings === undefined || proxy === undefined) return [];
  const hold = `variables.${prefix}Hold`;
  const drain = `variables.${prefix}Drain`;
  const entries: CelMapEntry[] = [];
  if (own(proxy, 'startupProbe') === undefined) {
    entries.push({ key: 'startupProbe', expression: `${native} && ${hold} ? optional.of(${celDyn(celValue(startupProbe(settings)))}) : optional.none()`, optional: true });
  }
  const lifecycle = objectAt(proxy, 'lifecycle');
  const hooks: CelMapEntry[] = Object.entries(lifecycle ?? {}).map(([key, value]) => ({ key, expression: celDyn(celValue(value)) }));
  const wanted: string[] = [];
  if (lifecycle === undefined || own(lifecycle, 'postStart') === undefined) {
    hooks.push({ key: 'postStart', expression: `!${native} && ${hold} ? optional.of(${celDyn(celValue(execHook(waitReadyScript(settings))))}) : optional.none()`, optional: true });
    wanted.push(hold);
  }
  if (lifecycle === undefined || own(lifecycle, 'preStop') === undefined) {
    // The webhook's hook with a placeholder for its script, which becomes the expression.
    const script = `${celString(drainScriptHead(settings))} + string(${drain})`;
    const hook = celValue(execHook('\u0000')).replace(celString('\u0000'), script);
    hooks.push({ key: 'preStop', expression: `!${native} && ${drain} > 0 ? optional.of(${celDyn(hook)}) : optional.none()`, optional: true });
    wanted.push(`${drain} > 0`);
  }
  if (lifecycle !== undefined) entries.push({ key: 'lifecycle', expression: celDyn(celMap(hooks)) });
  else entries.push({ key: 'lifecycle', expression: `!${native} && (${wanted.join(' || ')}) ? optional.of(dyn(${celMap(hooks)})) : optional.none()`, optional: true });
  return entries;
}

/**
 * Classic sidecars holding the app: the proxy goes first in `containers`.
 * `lead` is prepended, `rest` appended (the webhook's proxyFirst).
 */
export function classicContainerLists(template: SidecarTemplate, prefix: string): { lead: string; rest: string } | undefined {
  const name = entryName(template.containers[0]);
  if (template.proxyLifecycle === undefined || name === undefined) return undefined;
  const containers = `variables.${prefix}Containers`;
  const hold = `variables.${prefix}Hold`;
  return {
    lead: `(${hold} ? ${containers}.filter(e, e.name == ${celString(name)}) : [])`,
    rest: `(${hold} ? ${containers}.filter(e, e.name != ${celString(name)}) : ${containers})`,
  };
}

/**
 * kubectl's default container when the classic proxy goes first, as the
 * webhook's defaultContainerValue: the Pod's first own container, unless the
 * Pod names one; "" for none. None for a template without proxyLifecycle.
 */
export function defaultContainerVariables(template: SidecarTemplate, prefix: string): JsonObject[] {
  const classic = classicContainerLists(template, prefix);
  if (classic === undefined) return [];
  const named = `variables.annotations[?${celString(Annotations.defaultContainer)}].hasValue()`;
  return [
    {
      name: `${prefix}DefaultContainer`,
      expression: `!variables.${prefix}Native && size(${classic.lead}) > 0 && !${named} && has(object.spec.containers) && size(object.spec.containers) > 0 ? string(object.spec.containers[0].name) : ""`,
    },
  ];
}

/**
 * `cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes` as the
 * webhook writes it (safeToEvictValue): the template's local volumes that
 * the patch adds, appended to the Pod's own list; "" when there is nothing to add.
 */
export function safeToEvictVariables(template: SidecarTemplate, prefix: string, addedVolumes: string): JsonObject[] {
  const local = safeToEvictCandidates(template);
  if (local.length === 0) return [];
  const added = `${addedVolumes}.map(e, e.name).filter(n, n in ${celValue(local)} && !(n in variables.evictListed))`;
  return [
    { name: `${prefix}EvictAdded`, expression: added },
    {
      name: `${prefix}Evict`,
      expression:
        `size(variables.${prefix}EvictAdded) == 0 ? "" : size(variables.evictListed) == 0 ? variables.${prefix}EvictAdded.join(",") : ` +
        `variables.evictOwn.value() + (variables.evictOwn.value().endsWith(",") ? "" : ",") + variables.${prefix}EvictAdded.join(",")`,
    },
  ];
}

/** The template's volumes the annotation may name: none when it is off (then the policy has no `tNEvict`). */
export function safeToEvictCandidates(template: SidecarTemplate): string[] {
  if (!template.safeToEvictLocalVolumes) return [];
  return localVolumeNames([...template.volumes, ...(template.capture === undefined ? [] : [captureLockVolume()])]);
}
