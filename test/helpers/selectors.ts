import { isCelError, run, type CelInput } from '@bufbuild/cel';

/**
 * How the API server picks webhooks for a Pod CREATE, for the chart's
 * MutatingWebhookConfiguration: label selectors on the namespace and the Pod,
 * then the CEL matchConditions on the Pod.
 */

export interface LabelSelector {
  readonly matchLabels?: Readonly<Record<string, string>>;
  readonly matchExpressions?: readonly { key: string; operator: string; values?: readonly string[] }[];
}

/** metav1.LabelSelector semantics (an empty selector matches everything). */
export function selectorMatches(selector: LabelSelector | undefined, labels: Readonly<Record<string, string>>): boolean {
  if (selector === undefined) return true;
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (labels[key] !== value) return false;
  }
  for (const { key, operator, values = [] } of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(labels, key);
    const value = labels[key];
    const ok =
      operator === 'In' ? has && values.includes(value as string)
      : operator === 'NotIn' ? !has || !values.includes(value as string)
      : operator === 'Exists' ? has
      : operator === 'DoesNotExist' ? !has
      : undefined;
    if (ok === undefined) throw new Error(`unknown selector operator ${operator}`);
    if (!ok) return false;
  }
  return true;
}

/** JSON as CEL input: objects become CEL maps (plain objects are not maps to @bufbuild/cel). */
function toCel(value: unknown): CelInput {
  if (Array.isArray(value)) return value.map(toCel) as CelInput;
  if (value !== null && typeof value === 'object') return new Map(Object.entries(value).map(([key, entry]) => [key, toCel(entry)])) as CelInput;
  return value as CelInput;
}

/**
 * A matchCondition's expression on a Pod, bound as `object` like the API
 * server does. An evaluation error (which the API server would turn into the
 * failurePolicy) throws here, so a test sees it.
 */
export function evaluateCondition(expression: string, pod: unknown): boolean {
  const result = run(expression, { object: toCel(pod), oldObject: null });
  if (isCelError(result)) throw new Error(`CEL error in ${JSON.stringify(expression)}: ${result.message}`);
  if (typeof result !== 'boolean') throw new Error(`CEL expression ${JSON.stringify(expression)} gave ${String(result)}, not a boolean`);
  return result;
}

export interface Webhook {
  readonly name: string;
  readonly namespaceSelector?: LabelSelector;
  readonly objectSelector?: LabelSelector;
  readonly matchConditions?: readonly { name: string; expression: string }[];
  readonly failurePolicy?: string;
  readonly [field: string]: unknown;
}

/**
 * Names of the webhooks the API server would call for POD created in a
 * namespace with NAMESPACE_LABELS, in their order. Each one's selectors and
 * matchConditions see the Pod as the webhooks before it left it: MUTATE(name,
 * pod) gives the Pod after the call of webhook NAME (unchanged by default).
 */
export function webhooksCalled<P extends { metadata?: { labels?: Record<string, string> } }>(
  webhooks: readonly Webhook[],
  namespaceLabels: Readonly<Record<string, string>>,
  pod: P,
  mutate: (name: string, pod: P) => P = (_name, same) => same,
): string[] {
  const called: string[] = [];
  let current = pod;
  for (const webhook of webhooks) {
    const matches =
      selectorMatches(webhook.namespaceSelector, namespaceLabels) &&
      selectorMatches(webhook.objectSelector, current.metadata?.labels ?? {}) &&
      (webhook.matchConditions ?? []).every((condition) => evaluateCondition(condition.expression, current));
    if (!matches) continue;
    called.push(webhook.name);
    current = mutate(webhook.name, current);
  }
  return called;
}
