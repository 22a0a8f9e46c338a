import { Annotations, CAPTURE_CHECK_NAME, CAPTURE_INIT_NAME, CAPTURE_LOCK_VOLUME, entryName, InjectedLabel, MAX_ANNOTATIONS_BYTES, utf8Length, type SidecarTemplate } from '../injection/index.js';
import { captureLists, type CaptureLists } from './compile-capture.js';
import { reorderOps } from './compile-order.js';
import { statusProxyUid } from './compile-proxy-ids.js';
import { classicContainerLists, safeToEvictCandidates } from './compile-lifecycle.js';
import { celMap, celMapList, celString } from './cel-literal.js';
import { templateListMax, templateVariable } from './template-variable.js';

/**
 * The mutation's JSON Patch in CEL: per template, the webhook's merge by
 * name (docs/design.md §5) over the lists the variables hold, and the status
 * annotation and injected label it writes.
 */

/**
 * One template's patch: the webhook's lists, in its order, then the status
 * annotation and the injected label. With capture, envoy-init goes first
 * (native) or last (classic) among the init containers, and its volume after
 * the template's.
 */
function templatePatch(template: SidecarTemplate, index: number, capture: CaptureLists | undefined): string {
  const v = templateVariable(template, `t${index}`);
  const listOps = listOpsOf(templateListMax(template, `t${index}`));
  const native = v('Native');
  const { leading, leadingReversed, trailing, volumes } = patchLists(v, capture);
  // Holding the app with classic sidecars: the proxy first (at most one entry, so its reverse is itself).
  const classic = classicContainerLists(template, `t${index}`);
  const containers = classic === undefined ? listOps('containers', undefined, v('Containers')) : listOps('containers', { list: classic.lead, reversed: classic.lead }, classic.rest);
  const optional = optionalAnnotations(template, index);
  const parts = [
    `(${native} ? [] : ${containers})`,
    `(${native} ? ${listOps('initContainers', { list: leading, reversed: leadingReversed }, v('InitContainers'))} : ${listOps('initContainers', undefined, trailing)})`,
    listOps('volumes', undefined, volumes),
    listOps('imagePullSecrets', undefined, v('PullSecrets')),
    annotationOps(v('Status'), optional),
    labelOps(),
  ];
  return parts.join(' + ');
}

/** The annotations a template's patch writes when their value is not "": the autoscaler's, kubectl's default container. */
function optionalAnnotations(template: SidecarTemplate, index: number): { readonly key: string; readonly value: string }[] {
  const v = templateVariable(template, `t${index}`);
  return [
    ...(safeToEvictCandidates(template).length > 0 ? [{ key: Annotations.safeToEvictLocalVolumes, value: v('Evict') }] : []),
    ...(classicContainerLists(template, `t${index}`) === undefined ? [] : [{ key: Annotations.defaultContainer, value: v('DefaultContainer') }]),
  ];
}

/**
 * Whether the Pod's annotations, with what the template's patch writes
 * (replacing the Pod's own of the same key), stay within the API server's
 * bound: the webhook's annotationsSizeProblem (docs/design.md §14), in bytes
 * of UTF-8 as ValidateAnnotationsSize counts them (CEL's size() of a string
 * counts code points; of its bytes(), bytes).
 */
function annotationsFit(template: SidecarTemplate, index: number): string {
  const v = templateVariable(template, `t${index}`);
  const written = (key: string, value: string): string => `${utf8Length(key)} + size(bytes(${value}))`;
  const replaced = (key: string): string => `variables.annotations[?${celString(key)}].hasValue() ? ${written(key, `variables.annotations[${celString(key)}]`)} : 0`;
  const optional = optionalAnnotations(template, index).map(({ key, value }) => `(${value} == "" ? 0 : ${written(key, value)} - (${replaced(key)}))`);
  return [`variables.annotationsBytes`, written(Annotations.status, v('Status')), ...optional].join(' + ') + ` <= ${MAX_ANNOTATIONS_BYTES}`;
}

/** The lists of a template's patch, capture's entries included when it has them. */
function patchLists(v: (name: string) => string, capture: CaptureLists | undefined): { leading: string; leadingReversed: string; trailing: string; volumes: string } {
  if (capture === undefined) return { leading: v('Containers'), leadingReversed: v('ContainersReversed'), trailing: v('InitContainers'), volumes: v('Volumes') };
  return {
    leading: `(${capture.init} + ${v('Containers')})`,
    leadingReversed: `(${v('ContainersReversed')} + ${capture.init})`,
    trailing: `(${v('InitContainers')} + ${capture.init})`,
    volumes: `(${v('Volumes')} + ${capture.volume})`,
  };
}

/**
 * Adds `prepend` at the front and `append` at the end of `spec.<field>`: a
 * missing list is added whole (`add .../-` on a missing list fails). An
 * operation per element, unrolled for a template's list (`max` knows its
 * bound).
 */
function listOpsOf(max: (list: string) => number | undefined) {
  return (field: string, prepend: { list: string; reversed: string } | undefined, append: string): string => {
    if (prepend === undefined && append === '[]') return '[]';
    const whole = prepend === undefined ? append : append === '[]' ? prepend.list : `${prepend.list} + ${append}`;
    const path = (suffix: string): string => celString(`/spec/${field}${suffix}`);
    const each = (list: string, at: string): string => celMapList(list, (element) => `JSONPatch{op: "add", path: ${path(at)}, value: ${element}}`, max(list));
    const existing = prepend === undefined ? each(append, '/-') : append === '[]' ? each(prepend.reversed, '/0') : `${each(prepend.reversed, '/0')} + ${each(append, '/-')}`;
    return `(!has(object.spec.${field}) ? (size(${whole}) == 0 ? [] : [JSONPatch{op: "add", path: ${path('')}, value: ${whole}}]) : ${existing})`;
  };
}

/**
 * `envoy-injector.io/status` as the webhook writes it: JSON.stringify of the
 * template, its hash and the names added. Every name comes from the
 * template, so each one's JSON text (quotes and backslashes escaped) is a
 * literal looked up by name: byte for byte JSON.stringify's.
 */
export function statusText(template: SidecarTemplate, prefix: string): string {
  const v = templateVariable(template, prefix);
  const entries = [...template.containers, ...template.initContainers, ...template.volumes, ...template.imagePullSecrets];
  // Capture adds its init container and lock volume: their names can land in the status too.
  const known = [...entries.map((entry) => String(entry['name'])), ...(template.capture === undefined ? [] : [CAPTURE_INIT_NAME, CAPTURE_LOCK_VOLUME, CAPTURE_CHECK_NAME])];
  const encoded = celMap([...new Set(known)].map((name) => ({ key: name, expression: celString(JSON.stringify(name)) })));
  const max = templateListMax(template, prefix);
  const names = (list: string): string => (list === '[]' ? '""' : `${celMapList(list, (element) => `${encoded}[${element}.name]`, max(list))}.join(",")`);
  const native = v('Native');
  const head = JSON.stringify({ template: template.name, hash: template.hash, hashWithoutResources: template.hashWithoutResources }).slice(0, -1);
  const capture = captureLists(template, prefix);
  const { leading, trailing, volumes } = patchLists(v, capture);
  // The namespace's proxy uid after captureMode, as inject-pod.ts writes it.
  const lists = capture === undefined ? celString(']') : `(${capture.cni} ? ${celString('],"captureMode":"cni"')} : ${celString(']')})`;
  const end = `${lists} + ${statusProxyUid()} + ${celString('}')}`;
  return [
    celString(`${head},"containers":[`),
    `(${native} ? "" : ${names(v('Containers'))})`,
    celString('],"initContainers":['),
    `(${native} ? ${names(v('InitContainers') === '[]' ? leading : `(${leading} + ${v('InitContainers')})`)} : ${names(trailing)})`,
    celString('],"volumes":['),
    names(volumes),
    celString('],"imagePullSecrets":['),
    names(v('PullSecrets')),
    end,
  ].join(' + ');
}

/**
 * Adds the status annotation, and each optional one whose value is not ""
 * (the autoscaler's, kubectl's default container), without replacing the map
 * (which would wipe the others).
 */
function annotationOps(status: string, optional: readonly { readonly key: string; readonly value: string }[]): string {
  const key = celString(Annotations.status);
  const add = (name: string, value: string): string => `JSONPatch{op: "add", path: "/metadata/annotations/" + jsonpatch.escapeKey(${name}), value: ${value}}`;
  if (optional.length === 0) return `[has(object.metadata.annotations) ? ${add(key, status)} : JSONPatch{op: "add", path: "/metadata/annotations", value: {${key}: ${status}}}]`;
  const whole = `{${key}: ${status}, ${optional.map(({ key: name, value }) => `?${celString(name)}: ${value} != "" ? optional.of(${value}) : optional.none()`).join(', ')}}`;
  const existing = `[${add(key, status)}] + ${optional.map(({ key: name, value }) => `(${value} != "" ? [${add(celString(name), value)}] : [])`).join(' + ')}`;
  return `(has(object.metadata.annotations) ? ${existing} : [JSONPatch{op: "add", path: "/metadata/annotations", value: ${whole}}])`;
}

/** Adds the injected label without replacing the map (which would wipe the others). */
function labelOps(): string {
  const key = celString(InjectedLabel.key);
  const value = celString(InjectedLabel.value);
  return `[has(object.metadata.labels) ? JSONPatch{op: "add", path: "/metadata/labels/" + jsonpatch.escapeKey(${key}), value: ${value}} : JSONPatch{op: "add", path: "/metadata/labels", value: {${key}: ${value}}}]`;
}

/** The patch of the template the Pod names; none when the Pod is not to be injected. */
export function patchExpression(entries: readonly SidecarTemplate[]): string {
  let expression = '[]';
  let fits = 'true';
  for (let index = entries.length - 1; index >= 0; index -= 1) {
    const template = entries[index];
    if (template === undefined) continue;
    expression = `variables.template == ${celString(template.name)} ? ${templatePatch(template, index, captureLists(template, `t${index}`))} : ${expression}`;
    fits = `variables.template == ${celString(template.name)} ? ${annotationsFit(template, index)} : ${fits}`;
  }
  // A Pod without Pod-level resources (most) never evaluates the padding's variables: each costs the API server a program run per Pod.
  const padding = '(variables.podResources ? variables.resourcesPadding : optional.of([]))';
  // A Pod whose annotations our patch would push over the API server's bound gets no patch (the webhook's annotations_too_large).
  const padded = `(${padding}.hasValue() && (${fits}) ? (${expression}) + ${padding}.value().map(e, JSONPatch{op: "add", path: e[0], value: e[1]}) : [])`;
  // A Pod we injected (our status): reinvoked after a later webhook, only the order of its init containers (docs/design.md §14).
  return `!variables.inject ? [] : variables.statusText != "" ? (${reorderOps()}) : ${proxyNameTaken(entries)} ? [] : ${padded}`;
}

/**
 * The webhook's proxy-name rule: the Pod has a container of its own by the
 * proxy's name of the template it gets. One test when every template's proxy
 * has the same name (most sets); else one per template.
 */
function proxyNameTaken(entries: readonly SidecarTemplate[]): string {
  const taken = (template: SidecarTemplate): string => `${celString(entryName(template.containers[0]) ?? '')} in variables.containerNames`;
  const names = new Set(entries.map((template) => entryName(template.containers[0])));
  const [first] = entries;
  if (names.size === 1 && first !== undefined) return `(${taken(first)})`;
  return `(${entries.map((template) => `variables.template == ${celString(template.name)} ? ${taken(template)} : `).join('')}false)`;
}
