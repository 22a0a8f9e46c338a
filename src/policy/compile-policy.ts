import { createHash } from 'node:crypto';
import { ALWAYS_EXCLUDED_NAMESPACES, DEFAULT_ALLOWED_OVERRIDES, MAX_ANNOTATIONS_BYTES, NamespaceLabel, Rule, type JsonObject, type LabelSelector, type OverrideName, type TemplateSet } from '../injection/index.js';
import { PolicyLimitError } from '../errors.js';
import { MATCH_CONDITION, matchConditions } from './compile-match-conditions.js';
import { patchExpression } from './compile-patch.js';
import { policyVariables, readVariables } from './compile-variables.js';
import { policyLimitProblems } from './policy-limits.js';
import { policyApiVersionString, type PolicyApiVersion } from './policy-api-version.js';

/** What the policy needs besides the templates: the webhook's settings of the same name. */
export interface PolicySettings {
  /** Name of the policy and its binding. */
  readonly name?: string;
  /** The injector's own namespace: always excluded. */
  readonly injectorNamespace?: string | undefined;
  /** Namespaces never injected, beyond kube-system, kube-public and kube-node-lease. */
  readonly excludedNamespaces?: readonly string[];
  /** Native sidecars unless the template or the Pod says otherwise. */
  readonly nativeSidecar?: boolean;
  /** Which `envoy-injector.io/proxy-*` annotations Pods (and namespaces, as defaults) may use. */
  readonly allowedOverrides?: readonly OverrideName[];
  /** As the webhook's `--never-inject-selector`: a match condition. */
  readonly neverInjectSelectors?: readonly LabelSelector[];
  /** As the webhook's `--always-inject-selector`: part of the mutation's `inject`. */
  readonly alwaysInjectSelectors?: readonly LabelSelector[];
  /** What the API server does when an expression fails: as the webhook's failurePolicy. */
  readonly failurePolicy?: 'Fail' | 'Ignore';
  /** Labels for both objects (the chart's, or the command's). */
  readonly labels?: Readonly<Record<string, string>>;
  /** The API version of both objects (default v1, Kubernetes 1.36+). */
  readonly apiVersion?: PolicyApiVersion;
  /** An object whose deletion deletes both (the garbage collector follows the ownerReference). */
  readonly owner?: PolicyOwner;
  /**
   * Which release of the settings made the objects (the chart passes its
   * revision): a controller finding a higher one in the cluster stands by,
   * so an old replica never reverts a newer one during a rolling upgrade.
   */
  readonly generation?: number;
}

/** A cluster-scoped object, as an ownerReference names it. */
export interface PolicyOwner {
  readonly apiVersion: string;
  readonly kind: string;
  readonly name: string;
  readonly uid: string;
}

export const DEFAULT_POLICY_NAME = 'envoy-injector';
/** On the policy: the hashes of the templates it was compiled from, so a controller can tell it is current. */
export const TEMPLATES_ANNOTATION = 'envoy-injector.io/templates';
/** On the policy: a hash of everything that shapes both objects (templates and settings alike). */
export const POLICY_HASH_ANNOTATION = 'envoy-injector.io/policy-hash';
/** On the policy: the generation of the settings that made it (PolicySettings.generation). */
export const POLICY_GENERATION_ANNOTATION = 'envoy-injector.io/policy-generation';

export interface CompiledPolicy {
  readonly policy: JsonObject;
  readonly binding: JsonObject;
}

/**
 * Compiles a validated template set and the webhook's settings into a
 * MutatingAdmissionPolicy and its binding whose JSON Patch has, on every Pod,
 * the effect of the webhook's patch (docs/design.md §4-§5). The split:
 * - the binding's namespaceSelector: excluded namespaces and the `disabled` label;
 * - the match condition (one, its parts named): what the Pod alone decides
 *   (opted out, a never-inject selector, hostNetwork, Windows, an unknown Pod
 *   template); an already injected Pod reaches the mutation, which only
 *   restores the order of its init containers (compile-order.ts);
 * - the mutation: the always-inject selectors and the namespace's labels and
 *   annotations (`enabled`, its template, its proxy defaults: namespaceObject
 *   is only given to mutations), then the merge by name, per template (a
 *   namespace's unknown template matches no branch: no patch), and the
 *   padding of Pod-level resources (compile-resources.ts).
 * Throws PolicyLimitError when the API server would refuse the result.
 */
export function compilePolicy(templates: TemplateSet, settings: PolicySettings = {}): CompiledPolicy {
  const name = settings.name ?? DEFAULT_POLICY_NAME;
  const allowed = settings.allowedOverrides ?? DEFAULT_ALLOWED_OVERRIDES;
  const entries = [...templates.templates.values()];
  const apiVersion = policyApiVersionString(settings.apiVersion ?? 'v1');
  const owner = settings.owner;
  const metadata = (annotations?: Record<string, string>): JsonObject => ({
    name,
    ...(settings.labels === undefined ? {} : { labels: { ...settings.labels } }),
    ...(annotations === undefined ? {} : { annotations }),
    ...(owner === undefined ? {} : { ownerReferences: [{ apiVersion: owner.apiVersion, kind: owner.kind, name: owner.name, uid: owner.uid }] }),
  });

  const patch = patchExpression(entries);
  const policy: JsonObject = {
    apiVersion,
    kind: 'MutatingAdmissionPolicy',
    metadata: metadata({ [TEMPLATES_ANNOTATION]: templatesFingerprint(templates) }),
    spec: {
      failurePolicy: settings.failurePolicy ?? 'Fail',
      // As the webhook: run again when a later mutation changed the Pod; for a Pod we injected, only the order of its init containers.
      reinvocationPolicy: 'IfNeeded',
      matchConstraints: {
        matchPolicy: 'Equivalent',
        resourceRules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], scope: 'Namespaced' }],
      },
      matchConditions: matchConditions([...templates.templates.keys()], templates.defaultTemplate.name, settings.neverInjectSelectors),
      variables: readVariables(policyVariables(entries, templates.defaultTemplate.name, allowed, settings.nativeSidecar ?? false, settings.alwaysInjectSelectors), [patch]),
      mutations: [{ patchType: 'JSONPatch', jsonPatch: { expression: patch } }],
    },
  };
  const excluded = [...new Set([...ALWAYS_EXCLUDED_NAMESPACES, ...(settings.injectorNamespace ? [settings.injectorNamespace] : []), ...(settings.excludedNamespaces ?? [])])];
  const binding: JsonObject = {
    apiVersion,
    kind: 'MutatingAdmissionPolicyBinding',
    metadata: metadata(),
    spec: {
      policyName: name,
      matchResources: {
        namespaceSelector: {
          matchExpressions: [
            { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: excluded },
            { key: NamespaceLabel.key, operator: 'NotIn', values: [NamespaceLabel.disabled] },
          ],
        },
      },
    },
  };
  const problems = policyLimitProblems(templates, policy);
  if (problems.length > 0) throw new PolicyLimitError(problems);
  const annotations = (policy['metadata'] as { annotations: Record<string, string> }).annotations;
  annotations[POLICY_HASH_ANNOTATION] = 'sha256:' + createHash('sha256').update(JSON.stringify([policy['spec'], binding['spec']])).digest('hex').slice(0, 16);
  if (settings.generation !== undefined) annotations[POLICY_GENERATION_ANNOTATION] = String(settings.generation);
  return { policy, binding };
}

/** Where each rule of docs/design.md §4 lives in the compiled objects (for `explain --mode policy`). */
export const POLICY_RULE_PLACES: Readonly<Record<Rule, string>> = {
  [Rule.kind]: 'policy matchConstraints: Pods, CREATE',
  [Rule.excludedNamespace]: 'binding namespaceSelector: kubernetes.io/metadata.name NotIn',
  [Rule.namespaceDisabled]: `binding namespaceSelector: ${NamespaceLabel.key} NotIn ${NamespaceLabel.disabled}`,
  [Rule.podAnnotation]: `matchCondition ${MATCH_CONDITION}: not-opted-out; the mutation's explicit request`,
  [Rule.podSelector]: `matchCondition ${MATCH_CONDITION}: not-never-selected; the mutation's inject (always-inject selectors)`,
  [Rule.namespaceEnabled]: 'the mutation: namespaceObject labels',
  [Rule.hostNetwork]: `matchCondition ${MATCH_CONDITION}: not-host-network`,
  [Rule.windows]: `matchCondition ${MATCH_CONDITION}: not-windows`,
  [Rule.otherMesh]: `matchCondition ${MATCH_CONDITION}: not-other-mesh`,
  [Rule.proxyName]: "the mutation: no patch when the Pod has a container of its own by the template proxy's name (variables.containerNames)",
  [Rule.alreadyInjected]: `matchCondition ${MATCH_CONDITION}: nothing-to-reorder; the mutation: variables.statusText (the status annotation): only the order of init containers restored (variables.reorder)`,
  [Rule.podResources]: 'the mutation: variables.resourcesPadding pads spec.resources as the webhook does; a Pod it cannot pad gets no patch',
  [Rule.annotationsSize]: `the mutation: variables.annotationsBytes plus what the patch writes, within ${MAX_ANNOTATIONS_BYTES} bytes, else no patch`,
  [Rule.template]: `matchCondition ${MATCH_CONDITION}: known-template (the Pod's); the mutation's branch per template (the Pod's, else namespaceObject's label)`,
};

/** The templates' names and hashes, as the policy's TEMPLATES_ANNOTATION holds them. */
export function templatesFingerprint(templates: TemplateSet): string {
  return [...templates.templates.values()].map((template) => `${template.name}=${template.hash}`).join(',');
}

/** The compiled objects as JSON values, policy first (the binding refers to it). */
export function policyObjects(compiled: CompiledPolicy): JsonObject[] {
  return [compiled.policy, compiled.binding];
}
