import {
  Annotations,
  CAPTURE_EXCLUSION_ANNOTATIONS,
  CAPTURE_CHECK_NAME,
  CAPTURE_EXCLUSION_KINDS,
  CIDR_LIST_PATTERN,
  captureCheckContainer,
  captureInitContainer,
  captureLockVolume,
  CaptureModeSetting,
  isJsonObject,
  MAX_CAPTURE_LIST_LENGTH,
  PodSecurityLabel,
  PORT_LIST_PATTERN,
  type CaptureExclusionName,
  type CaptureExclusions,
  type JsonObject,
  type JsonValue,
  type SidecarTemplate,
} from '../injection/index.js';
import { celDyn, celMap, celString, celValue } from './cel-literal.js';
import { checkContextExpression, proxyUidArgExpression } from './compile-proxy-ids.js';

/**
 * Traffic capture in policy mode (docs/design.md §11): the same decision as
 * decideCapture and the same envoy-init container as captureInitContainer
 * (or, in CNI mode, check container as captureCheckContainer),
 * in CEL. The exclusions are checked with the very patterns of
 * capture-grammar.ts, and the container is the webhook's own, with the
 * rule script's exclusion arguments made expressions.
 */

const EXCLUSIONS = Object.keys(CAPTURE_EXCLUSION_KINDS) as CaptureExclusionName[];

/** `captureExcludeOutboundCidrs` ...: the annotation, an optional string. */
const variableOf = (name: CaptureExclusionName): string => `capture${name.charAt(0).toUpperCase()}${name.slice(1)}`;

/** The variables every template's capture reads: the Pod's annotations, hostNetwork, the namespace's Pod Security level (`captureForbidden`: NET_ADMIN refused). */
export function captureSharedVariables(entries: readonly SidecarTemplate[]): JsonObject[] {
  if (!entries.some((template) => template.capture !== undefined)) return [];
  const forbidding = celValue([...PodSecurityLabel.forbiddingCapture]);
  const list: JsonObject[] = [
    { name: 'captureAnnotation', expression: `variables.annotations[?${celString(Annotations.capture)}].orValue("")` },
    { name: 'captureNotHostNetwork', expression: '!(has(object.spec.hostNetwork) && object.spec.hostNetwork)' },
    {
      name: 'captureForbidden',
      expression: `has(namespaceObject.metadata.labels) && namespaceObject.metadata.labels[?${celString(PodSecurityLabel.enforce)}].orValue("") in ${forbidding}`,
    },
  ];
  for (const name of EXCLUSIONS) {
    const variable = variableOf(name);
    const pattern = CAPTURE_EXCLUSION_KINDS[name] === 'ports' ? PORT_LIST_PATTERN : CIDR_LIST_PATTERN;
    list.push({ name: variable, expression: `variables.annotations[?${celString(CAPTURE_EXCLUSION_ANNOTATIONS[name])}]` });
    list.push({
      name: `${variable}Valid`,
      expression: `variables.${variable}.hasValue() && size(variables.${variable}.value()) <= ${MAX_CAPTURE_LIST_LENGTH} && variables.${variable}.value().matches(${celString(pattern)})`,
    });
  }
  return list;
}

/**
 * One template's capture: whether it applies, whether in CNI mode, the init
 * container (envoy-init, or CNI mode's check) and the volume it adds (none in
 * CNI mode, none for a template that cannot capture).
 */
export function captureTemplateVariables(template: SidecarTemplate, prefix: string): JsonObject[] {
  const { capture } = template;
  if (capture === undefined) return [];
  const wanted = `variables.captureAnnotation == "true" || (variables.captureAnnotation != "false" && ${String(capture.enabled)})`;
  // The webhook's containers with placeholders, whose args become expressions below.
  const placeholder = (name: CaptureExclusionName): string => `\u0000${name}\u0000`;
  const placeholders: CaptureExclusions = {
    excludeOutboundCidrs: placeholder('excludeOutboundCidrs'),
    excludeOutboundPorts: placeholder('excludeOutboundPorts'),
    excludeInboundPorts: placeholder('excludeInboundPorts'),
    includeInboundPorts: placeholder('includeInboundPorts'),
  };
  // The args' exclusions and --proxy-uid are expressions, and so is the check's securityContext (the namespace's OpenShift ids).
  const entryExpression = (entry: JsonObject, key: string, value: JsonValue | undefined): string => {
    if (key === 'args') return celDyn(argsExpression(entry['args'], capture.defaults, capture.proxyUid));
    if (key === 'securityContext' && entry['name'] === CAPTURE_CHECK_NAME && isJsonObject(value)) return checkContextExpression(value);
    return celDyn(celValue(value ?? null));
  };
  const container = (entry: JsonObject): string => `[${celMap(Object.entries(entry).map(([key, value]) => ({ key, expression: entryExpression(entry, key, value) })))}]`;
  const init = container(captureInitContainer(capture, placeholders));
  const check = container(captureCheckContainer(capture, placeholders));
  const volume = `[${celValue(captureLockVolume())}]`;
  const allowed = capture.mode === CaptureModeSetting.initContainer ? '!variables.captureForbidden' : 'true';
  // `auto`: CNI mode where Pod Security forbids envoy-init, or where the namespace has an OpenShift uid range (its SCC refuses envoy-init).
  const cni = { [CaptureModeSetting.initContainer]: 'false', [CaptureModeSetting.cni]: 'true', [CaptureModeSetting.auto]: '(variables.captureForbidden || variables.namespaceUidRange)' }[capture.mode];
  const capturing = `variables.${prefix}Capture`;
  const inCni = `variables.${prefix}CaptureCni`;
  return [
    { name: `${prefix}Capture`, expression: `(${wanted}) && variables.captureNotHostNetwork && ${allowed}` },
    { name: `${prefix}CaptureCni`, expression: `${capturing} && ${cni}` },
    { name: `${prefix}CaptureInit`, expression: `!${capturing} ? [] : (${inCni} ? ${check} : ${init}).filter(e, !(e.name in variables.containerNames))` },
    { name: `${prefix}CaptureVolume`, expression: `${capturing} && !${inCni} ? ${volume}.filter(e, !(e.name in variables.volumeNames)) : []` },
  ];
}

/** The rule script's arguments: the fixed ones as literals, `--proxy-uid` the namespace's or the template's, each exclusion the Pod's valid annotation or the template's default. */
function argsExpression(args: JsonValue | undefined, defaults: CaptureExclusions, templateUid: number): string {
  const items = (Array.isArray(args) ? args : []).map((arg) => {
    const text = String(arg);
    if (text.startsWith('--proxy-uid=')) return proxyUidArgExpression(templateUid);
    const name = EXCLUSIONS.find((exclusion) => text.endsWith(`\u0000${exclusion}\u0000`));
    if (name === undefined) return celString(text);
    const variable = `variables.${variableOf(name)}`;
    const flag = text.slice(0, text.indexOf('\u0000'));
    return `${celString(flag)} + (${variable}Valid ? ${variable}.value() : ${celString(defaults[name])})`;
  });
  return `[${items.join(', ')}]`;
}

/** What a template's capture adds to its patch's lists, as CEL list expressions; undefined when it cannot capture. */
export interface CaptureLists {
  readonly init: string;
  readonly volume: string;
  /** True in CNI mode: the status says `"captureMode":"cni"`. */
  readonly cni: string;
}

export function captureLists(template: SidecarTemplate, prefix: string): CaptureLists | undefined {
  return template.capture === undefined ? undefined : { init: `variables.${prefix}CaptureInit`, volume: `variables.${prefix}CaptureVolume`, cni: `variables.${prefix}CaptureCni` };
}
