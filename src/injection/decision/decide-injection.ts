import { ALWAYS_EXCLUDED_NAMESPACES, Annotations, arrayAt, describeValue, entryName, NamespaceLabel, objectAt, own, stringAt, type JsonObject } from '../basics/index.js';
import { describeSelector, selectorMatches, type LabelSelector } from './label-selector.js';
import type { SidecarTemplate, TemplateSet } from '../template/index.js';
import { otherMeshIn } from './other-meshes.js';
import { windowsOnly } from './pod-os.js';
import { copiedStatusProblem } from './status-annotation.js';

/**
 * Why a Pod was or was not injected: a fixed set, used as metric labels, log
 * fields and audit annotations alike (never free text in a label).
 */
export const Reason = {
  notPodCreate: 'not_pod_create',
  excludedNamespace: 'excluded_namespace',
  namespaceDisabled: 'namespace_disabled',
  podAnnotationFalse: 'pod_annotation_false',
  podAnnotationTrue: 'pod_annotation_true',
  legacyAnnotation: 'legacy_annotation',
  /** A central selector (`--never-inject-selector`) matched the Pod's labels. */
  neverInjectSelector: 'never_inject_selector',
  /** A central selector (`--always-inject-selector`) matched the Pod's labels. */
  alwaysInjectSelector: 'always_inject_selector',
  namespaceEnabled: 'namespace_enabled',
  namespaceNotEnabled: 'namespace_not_enabled',
  hostNetwork: 'host_network',
  /** The Pod runs on Windows nodes only: a Linux proxy cannot run there, and the API server refuses its Linux-only fields. */
  windowsPod: 'windows_pod',
  alreadyInjected: 'already_injected',
  statusCopied: 'status_copied',
  /** Another mesh (Istio, Linkerd, Kuma, Consul: other-meshes.ts) already injected the Pod: a second proxy would fight its own over the traffic. */
  otherMeshInjected: 'other_mesh_injected',
  /** The Pod's own container has the chosen template's proxy name (Contour's `envoy`): not ours, and ours cannot be added beside it. */
  proxyNameTaken: 'proxy_name_taken',
  unknownTemplate: 'unknown_template',
  /** The namespace's `envoy-injector.io/template` label names no template (the Pod names none). */
  unknownNamespaceTemplate: 'unknown_namespace_template',
  requestedOffline: 'requested_offline',
  /** A value of the Pod's spec.resources cannot be padded by what the injected containers add (pod-resources.ts). */
  podResourcesUnpaddable: 'pod_resources_unpaddable',
  /** The injected Pod's annotations would be over the API server's bound, 256 KiB of keys and values (annotations-size.ts). */
  annotationsTooLarge: 'annotations_too_large',
  templateNotLoaded: 'template_not_loaded',
} as const;
export type Reason = (typeof Reason)[keyof typeof Reason];

/** The rules of docs/design.md §4, in the order they are looked at. */
export const Rule = {
  kind: 'kind',
  excludedNamespace: 'excluded-namespace',
  namespaceDisabled: 'namespace-disabled',
  podAnnotation: 'pod-annotation',
  podSelector: 'pod-selector',
  namespaceEnabled: 'namespace-enabled',
  hostNetwork: 'host-network',
  windows: 'windows',
  alreadyInjected: 'already-injected',
  otherMesh: 'other-mesh',
  template: 'template',
  /** After the template: the Pod has no container of its own by the template proxy's name. */
  proxyName: 'proxy-name',
  /** After the merge: the Pod-level resources padded (pod-resources.ts). */
  podResources: 'pod-resources',
  /** After the merge: the injected Pod's annotations within the API server's bound (annotations-size.ts). */
  annotationsSize: 'annotations-size',
} as const;
export type Rule = (typeof Rule)[keyof typeof Rule];

export interface TraceStep {
  readonly rule: Rule;
  /** `continue`: the rule let the Pod through to the next one. */
  readonly outcome: 'continue' | 'inject' | 'skip';
  readonly detail: string;
}

export interface DecisionOptions {
  /** Namespaces never injected, beyond kube-system, kube-public and kube-node-lease. */
  readonly excludedNamespaces?: readonly string[];
  /** The injector's own namespace: always excluded. */
  readonly injectorNamespace?: string | undefined;
  /**
   * The offline `inject` command: asking means injecting, so namespace rules
   * are not looked at and every Pod not opted out is injected (as
   * `istioctl kube-inject` does). Pod rules (annotation, hostNetwork,
   * already injected) still apply.
   */
  readonly offline?: boolean;
  /** Server or command setting for native sidecars, after `auto` is resolved. */
  readonly nativeSidecar?: boolean;
  /** Pods whose labels match one of these are not injected unless annotated `"true"` (Istio's neverInjectSelector). */
  readonly neverInjectSelectors?: readonly LabelSelector[];
  /** Pods whose labels match one of these (and no never-selector) are injected unless annotated `"false"`. */
  readonly alwaysInjectSelectors?: readonly LabelSelector[];
}

/** Where the template of an injected Pod was chosen. */
export type TemplateSource = 'pod' | 'namespace' | 'default';

export interface DecisionInput {
  readonly operation: string;
  /** `request.kind` of the review (group empty for core). */
  readonly kind: { readonly group: string; readonly kind: string };
  readonly subResource?: string | undefined;
  /** `request.namespace`: controllers' Pods may lack `metadata.namespace`. */
  readonly namespace: string;
  /** Labels of the namespace; undefined when unknown (treated as none). */
  readonly namespaceLabels: Readonly<Record<string, string>> | undefined;
  /** The namespace's `envoy-injector.io/` annotations (proxy defaults); undefined when unknown or none. */
  readonly namespaceAnnotations?: Readonly<Record<string, string>> | undefined;
  readonly pod: JsonObject;
  /** Undefined until a valid template set is loaded: such Pods are let through uninjected. */
  readonly templates: TemplateSet | undefined;
  readonly options: DecisionOptions;
}

export type Decision =
  | {
      readonly inject: true;
      readonly reason: Reason;
      readonly message: string;
      /** The rule that opted the Pod in. */
      readonly rule: Rule;
      readonly template: SidecarTemplate;
      /** The Pod's annotation, its namespace's label, or the set's default. */
      readonly templateSource: TemplateSource;
      readonly nativeSidecar: boolean;
      readonly warnings: readonly string[];
      readonly trace: readonly TraceStep[];
    }
  | {
      readonly inject: false;
      readonly reason: Reason;
      readonly message: string;
      readonly rule: Rule;
      readonly warnings: readonly string[];
      readonly trace: readonly TraceStep[];
    };

/** Decides whether a Pod gets the sidecar, following docs/design.md §4 rule by rule. */
export function decideInjection(input: DecisionInput): Decision {
  const walk = new RuleWalk();
  const annotations = objectAt(objectAt(input.pod, 'metadata'), 'annotations');
  const labels = input.namespaceLabels ?? {};
  const namespaceLabel = Object.hasOwn(labels, NamespaceLabel.key) ? labels[NamespaceLabel.key] : undefined;
  const early = kindRule(input, walk) ?? namespaceRules(input, namespaceLabel, walk);
  if (early !== undefined) return early;
  const optIn = optInRules(input, annotations, namespaceLabel, walk);
  if ('inject' in optIn) return optIn;
  walk.trace.push({ rule: optIn.rule, outcome: 'inject', detail: optIn.message });
  const podSkip =
    hostNetworkRule(input.pod, optIn, walk) ?? windowsRule(input.pod, walk) ?? alreadyInjectedRule(input.pod, annotations, walk) ?? otherMeshRule(input.pod, walk);
  if (podSkip !== undefined) return podSkip;
  const chosen = templateRule(input, annotations, labels, walk);
  if ('inject' in chosen) return chosen;
  const { template, source: templateSource } = chosen;
  const clash = proxyNameRule(input.pod, template, walk);
  if (clash !== undefined) return clash;

  const nativeAnnotation = readBooleanAnnotation(annotations, Annotations.nativeSidecar, walk.warnings);
  const nativeSidecar = nativeAnnotation ?? template.nativeSidecar ?? input.options.nativeSidecar ?? false;
  return { inject: true, reason: optIn.reason, message: optIn.message, rule: optIn.rule, template, templateSource, nativeSidecar, warnings: walk.warnings, trace: walk.trace };
}

/** The rules looked at so far (the trace) and the warnings they raised. */
class RuleWalk {
  readonly trace: TraceStep[] = [];
  readonly warnings: string[] = [];

  /** The rule decides: the Pod is not injected. */
  skip(rule: Rule, reason: Reason, message: string): Decision {
    this.trace.push({ rule, outcome: 'skip', detail: message });
    return { inject: false, reason, message, rule, warnings: this.warnings, trace: this.trace };
  }

  /** The rule lets the Pod through to the next one. */
  pass(rule: Rule, detail: string): void {
    this.trace.push({ rule, outcome: 'continue', detail });
  }
}

/** What opted the Pod in. */
interface OptIn {
  readonly rule: Rule;
  readonly reason: Reason;
  readonly message: string;
}

/** 1. Only Pods, only CREATE. */
function kindRule(input: DecisionInput, walk: RuleWalk): Decision | undefined {
  const isPod = input.kind.group === '' && input.kind.kind === 'Pod' && !input.subResource;
  if (!isPod || input.operation !== 'CREATE') {
    const what = `${input.operation} of ${input.kind.kind}${input.subResource ? `/${input.subResource}` : ''}`;
    return walk.skip(Rule.kind, Reason.notPodCreate, `${what}: only Pod CREATE requests are injected`);
  }
  walk.pass(Rule.kind, 'a Pod CREATE');
  return undefined;
}

/** 2.-3. Namespace exclusions: the namespace owner's word beats the Pod's (not looked at offline). */
function namespaceRules({ namespace, options }: DecisionInput, namespaceLabel: string | undefined, walk: RuleWalk): Decision | undefined {
  if (options.offline) return undefined;
  if (isExcludedNamespace(namespace, options)) {
    return walk.skip(Rule.excludedNamespace, Reason.excludedNamespace, `namespace "${namespace}" is excluded from injection`);
  }
  walk.pass(Rule.excludedNamespace, `namespace "${namespace}" is not excluded`);
  if (namespaceLabel === NamespaceLabel.disabled) {
    return walk.skip(Rule.namespaceDisabled, Reason.namespaceDisabled, `namespace "${namespace}" is labeled ${NamespaceLabel.key}=${NamespaceLabel.disabled}`);
  }
  walk.pass(Rule.namespaceDisabled, `namespace "${namespace}" is not labeled ${NamespaceLabel.key}=${NamespaceLabel.disabled}`);
  return undefined;
}

/** 4.-5. The Pod's annotation, else the central selectors (4a), else the namespace label. */
function optInRules(input: DecisionInput, annotations: JsonObject | undefined, namespaceLabel: string | undefined, walk: RuleWalk): OptIn | Decision {
  const { namespace, options } = input;
  const injectAnnotation = readBooleanAnnotation(annotations, Annotations.inject, walk.warnings);
  const legacyAnnotation = annotations === undefined ? undefined : stringAt(annotations, Annotations.legacyInject);
  if (injectAnnotation === false) {
    return walk.skip(Rule.podAnnotation, Reason.podAnnotationFalse, `the Pod is annotated ${Annotations.inject}: "false"`);
  } else if (injectAnnotation === true) {
    return { rule: Rule.podAnnotation, reason: Reason.podAnnotationTrue, message: `the Pod is annotated ${Annotations.inject}: "true"` };
  } else if (legacyAnnotation === 'true') {
    return { rule: Rule.podAnnotation, reason: Reason.legacyAnnotation, message: `the Pod is annotated ${Annotations.legacyInject}: "true"` };
  }
  const hasSelectors = (options.neverInjectSelectors?.length ?? 0) + (options.alwaysInjectSelectors?.length ?? 0) > 0;
  if (!options.offline || hasSelectors) walk.pass(Rule.podAnnotation, `the Pod has no ${Annotations.inject} annotation`);
  const selected = hasSelectors ? selectorRule(input.pod, options, walk) : undefined;
  if (selected !== undefined) return selected;
  if (options.offline) return { rule: Rule.podAnnotation, reason: Reason.requestedOffline, message: 'injection was asked for (offline inject)' };
  if (namespaceLabel !== NamespaceLabel.enabled) {
    return walk.skip(
      Rule.namespaceEnabled,
      Reason.namespaceNotEnabled,
      `namespace "${namespace}" is not labeled ${NamespaceLabel.key}=${NamespaceLabel.enabled} and the Pod is not annotated ${Annotations.inject}: "true"`,
    );
  }
  return { rule: Rule.namespaceEnabled, reason: Reason.namespaceEnabled, message: `namespace "${namespace}" is labeled ${NamespaceLabel.key}=${NamespaceLabel.enabled}` };
}

/** 6. hostNetwork Pods share the node's ports: only on explicit request. */
function hostNetworkRule(pod: JsonObject, optIn: OptIn, walk: RuleWalk): Decision | undefined {
  const explicitlyAsked = optIn.reason === Reason.podAnnotationTrue || optIn.reason === Reason.legacyAnnotation;
  if (own(objectAt(pod, 'spec') ?? {}, 'hostNetwork') === true && !explicitlyAsked) {
    return walk.skip(Rule.hostNetwork, Reason.hostNetwork, `the Pod uses hostNetwork; annotate it ${Annotations.inject}: "true" to inject it anyway`);
  }
  walk.pass(Rule.hostNetwork, explicitlyAsked ? 'hostNetwork allowed by the annotation' : 'the Pod does not use hostNetwork');
  return undefined;
}

/** 6a. A Pod that runs on Windows nodes only: whoever asked, a Linux proxy cannot run there. */
function windowsRule(pod: JsonObject, walk: RuleWalk): Decision | undefined {
  const why = windowsOnly(pod);
  if (why !== undefined) {
    walk.warnings.push(`the Pod runs on Windows (${why}): it was not injected, as a Linux proxy cannot run there; annotate it ${Annotations.inject}: "false" to say it is meant`);
    return walk.skip(Rule.windows, Reason.windowsPod, `the Pod runs on Windows (${why}): a Linux proxy cannot run there`);
  }
  walk.pass(Rule.windows, 'the Pod may run on Linux nodes');
  return undefined;
}

/** 7. Reinvocation and retries are no-ops. A status whose containers the Pod lacks was not written into this Pod by us. */
function alreadyInjectedRule(pod: JsonObject, annotations: JsonObject | undefined, walk: RuleWalk): Decision | undefined {
  const status = annotations === undefined ? undefined : own(annotations, Annotations.status);
  if (status !== undefined) {
    const copied = copiedStatusProblem(status, pod);
    if (copied !== undefined) {
      walk.warnings.push(`${Annotations.status}: ${copied}: it was copied into the Pod (from a running Pod's YAML?); remove it from the Pod template, or its Pods never get the sidecar`);
      return walk.skip(Rule.alreadyInjected, Reason.statusCopied, `the Pod carries a copied ${Annotations.status} (${copied})`);
    }
    return walk.skip(Rule.alreadyInjected, Reason.alreadyInjected, `the Pod already carries ${Annotations.status}`);
  }
  walk.pass(Rule.alreadyInjected, `the Pod has no ${Annotations.status} annotation`);
  return undefined;
}

/** 7a. Another mesh's proxy and rules already hold the Pod's traffic: whoever asked, a second proxy would fight them. */
function otherMeshRule(pod: JsonObject, walk: RuleWalk): Decision | undefined {
  const found = otherMeshIn(pod);
  if (found !== undefined) {
    const message = `the Pod was already injected by ${found.mesh} (${found.marks.join(', ')})`;
    walk.warnings.push(
      `${message}: it was not injected, as two proxies would fight over its traffic; annotate it ${Annotations.inject}: "false" to say it is meant, or take it out of one mesh`,
    );
    return walk.skip(Rule.otherMesh, Reason.otherMeshInjected, message);
  }
  walk.pass(Rule.otherMesh, 'the Pod holds no mark of another mesh (Istio, Linkerd, Kuma, Consul)');
  return undefined;
}

/**
 * 8. A container of the Pod's own with the proxy's name (Contour's `envoy`):
 * names are unique across the lists, so ours cannot be added, and the Pod's
 * own is not ours (our status, rule 7, marks a Pod we injected).
 */
function proxyNameRule(pod: JsonObject, template: SidecarTemplate, walk: RuleWalk): Decision | undefined {
  const proxyName = entryName(template.containers[0]);
  const spec = objectAt(pod, 'spec');
  const taken = ['containers', 'initContainers', 'ephemeralContainers'].some((list) => (arrayAt(spec, list) ?? []).some((entry) => entryName(entry) === proxyName));
  if (proxyName !== undefined && taken) {
    const message = `the Pod already has a container named "${proxyName}" that the injector did not add, the name of template "${template.name}"'s proxy`;
    walk.warnings.push(
      `${message}: it was not injected (a second ${proxyName} cannot be added, and the Pod's own is not ours); rename that container, name another template in ${Annotations.template}, or annotate the Pod ${Annotations.inject}: "false" to say it is meant`,
    );
    return walk.skip(Rule.proxyName, Reason.proxyNameTaken, message);
  }
  walk.pass(Rule.proxyName, `the Pod has no container named "${proxyName ?? ''}" of its own`);
  return undefined;
}

/** Template choice (the Pod's, its namespace's, the default): a missing set or an unknown name must never crash or block the Pod. */
function templateRule(
  { templates, namespace }: DecisionInput,
  annotations: JsonObject | undefined,
  namespaceLabels: Readonly<Record<string, string>>,
  walk: RuleWalk,
): { readonly template: SidecarTemplate; readonly source: TemplateSource } | Decision {
  if (templates === undefined) {
    walk.warnings.push('envoy-injector has no valid sidecar template loaded yet; the Pod was created without the sidecar');
    return walk.skip(Rule.template, Reason.templateNotLoaded, 'no valid template is loaded yet');
  }
  const chosen = chooseTemplate(templates, annotations, namespaceLabels, namespace);
  if (chosen.template === undefined) {
    walk.warnings.push(chosen.warning);
    return walk.skip(Rule.template, chosen.reason, chosen.message);
  }
  walk.pass(Rule.template, `template "${chosen.template.name}" (${chosen.template.hash})${chosen.source === 'default' ? '' : `, ${describeTemplateSource(chosen.source, namespace)}`}`);
  return chosen;
}

/** 4a. The first never-selector matching the Pod's labels skips it; else the first always-selector injects it. */
function selectorRule(pod: JsonObject, options: DecisionOptions, walk: RuleWalk): OptIn | Decision | undefined {
  const labels = objectAt(objectAt(pod, 'metadata'), 'labels');
  const never = options.neverInjectSelectors?.find((selector) => selectorMatches(selector, labels));
  if (never !== undefined) {
    return walk.skip(
      Rule.podSelector,
      Reason.neverInjectSelector,
      `the Pod's labels match the never-inject selector "${describeSelector(never)}"; annotate it ${Annotations.inject}: "true" to inject it anyway`,
    );
  }
  const always = options.alwaysInjectSelectors?.find((selector) => selectorMatches(selector, labels));
  if (always !== undefined) return { rule: Rule.podSelector, reason: Reason.alwaysInjectSelector, message: `the Pod's labels match the always-inject selector "${describeSelector(always)}"` };
  walk.pass(Rule.podSelector, "the Pod's labels match no central selector");
  return undefined;
}

export type TemplateChoice =
  | { readonly template: SidecarTemplate; readonly source: TemplateSource }
  | { readonly template: undefined; readonly reason: Reason; readonly message: string; readonly warning: string };

/** The Pod's `envoy-injector.io/template`, else its namespace's label of that key, else the default. */
export function chooseTemplate(templates: TemplateSet, annotations: JsonObject | undefined, namespaceLabels: Readonly<Record<string, string>>, namespace: string): TemplateChoice {
  const known = (): string => [...templates.templates.keys()].map((name) => `"${name}"`).join(', ');
  const podName = annotations === undefined ? undefined : stringAt(annotations, Annotations.template);
  if (podName !== undefined) {
    const template = templates.templates.get(podName);
    if (template !== undefined) return { template, source: 'pod' };
    return {
      template: undefined,
      reason: Reason.unknownTemplate,
      message: `no template named ${describeValue(podName)}`,
      warning: `${Annotations.template}: no template named ${describeValue(podName)} (known: ${known()}); the Pod was not injected`,
    };
  }
  const namespaceName = Object.hasOwn(namespaceLabels, NamespaceLabel.template) ? namespaceLabels[NamespaceLabel.template] : undefined;
  if (namespaceName === undefined) return { template: templates.defaultTemplate, source: 'default' };
  const template = templates.templates.get(namespaceName);
  if (template !== undefined) return { template, source: 'namespace' };
  return {
    template: undefined,
    reason: Reason.unknownNamespaceTemplate,
    message: `namespace "${namespace}" is labeled ${NamespaceLabel.template}=${namespaceName}, and there is no template of that name`,
    warning: `${NamespaceLabel.template}: namespace "${namespace}" picks the template ${describeValue(namespaceName)}, and there is none of that name (known: ${known()}); the Pod was not injected`,
  };
}

export function describeTemplateSource(source: TemplateSource, namespace: string): string {
  return source === 'pod' ? `named by the Pod's ${Annotations.template} annotation` : source === 'namespace' ? `picked by namespace "${namespace}"'s ${NamespaceLabel.template} label` : 'the default';
}

export function isExcludedNamespace(namespace: string, options: DecisionOptions): boolean {
  return (
    ALWAYS_EXCLUDED_NAMESPACES.includes(namespace) ||
    namespace === options.injectorNamespace ||
    (options.excludedNamespaces ?? []).includes(namespace)
  );
}

/** `"true"`/`"false"` as a boolean; anything else is ignored with a warning. */
export function readBooleanAnnotation(annotations: JsonObject | undefined, key: string, warnings: string[]): boolean | undefined {
  if (annotations === undefined) return undefined;
  const value = own(annotations, key);
  if (value === undefined) return undefined;
  if (value === 'true') return true;
  if (value === 'false') return false;
  warnings.push(`${key}: ${describeValue(value)} is not "true" or "false"; ignored`);
  return undefined;
}
