import type { JsonObject, SidecarTemplate } from '../injection/index.js';

/**
 * A reference to one of a template's variables (`prefix` is `t<index>`):
 * `variables.<prefix><name>`, except a list the template does not have
 * (no init containers, no pull secrets, no volumes), which is `[]` where it
 * is read and no variable at all. Each variable a Pod reads costs the API
 * server a program run (cel-go plans the expression and starts a cost
 * tracker per evaluation): an empty list should not.
 */
export function templateVariable(template: SidecarTemplate, prefix: string): (name: string) => string {
  return (name) => (hasNoEntries(template, name) ? '[]' : `variables.${prefix}${name}`);
}

/** A template's lists that may be empty, by the name their variable ends with (`t<index>InitContainers`, ...). */
export function templateLists(template: SidecarTemplate): Readonly<Record<'InitContainers' | 'Volumes' | 'PullSecrets', readonly JsonObject[]>> {
  return { InitContainers: template.initContainers, Volumes: template.volumes, PullSecrets: template.imagePullSecrets };
}

/** Whether the template's list NAME (`InitContainers`, `Volumes`, `PullSecrets`) is empty: it then has no variable. */
export function hasNoEntries(template: SidecarTemplate, name: string): boolean {
  return (templateLists(template) as Readonly<Record<string, readonly JsonObject[]>>)[name]?.length === 0;
}

/**
 * The most elements a template's list variable can hold (its entries, each
 * added unless the Pod has one of its name), for celMapList; undefined for
 * any other expression.
 */
export function templateListMax(template: SidecarTemplate, prefix: string): (list: string) => number | undefined {
  const sizes: Record<string, number> = { Containers: template.containers.length, ContainersReversed: template.containers.length };
  for (const [name, entries] of Object.entries(templateLists(template))) sizes[name] = entries.length;
  return (list) => (list.startsWith(`variables.${prefix}`) ? sizes[list.slice(`variables.${prefix}`.length)] : undefined);
}
