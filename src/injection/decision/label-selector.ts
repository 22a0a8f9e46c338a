import { describeValue, isJsonObject, own, type JsonObject } from '../basics/index.js';

/** A Kubernetes label selector (`metav1.LabelSelector`), validated. */
export interface LabelSelector {
  readonly matchLabels: Readonly<Record<string, string>>;
  readonly matchExpressions: readonly SelectorRequirement[];
}

export interface SelectorRequirement {
  readonly key: string;
  readonly operator: SelectorOperator;
  readonly values: readonly string[];
}

export const SelectorOperators = ['In', 'NotIn', 'Exists', 'DoesNotExist'] as const;
export type SelectorOperator = (typeof SelectorOperators)[number];

const LABEL_NAME = /^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$/;

/** Why `key` is not a label key (`[prefix/]name`), or undefined when it is. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.lastIndexOf('/');
  const prefix = slash < 0 ? undefined : key.slice(0, slash);
  const name = slash < 0 ? key : key.slice(slash + 1);
  if (prefix !== undefined && (prefix.length > 253 || !DNS_SUBDOMAIN.test(prefix))) return `${describeValue(key)}: the prefix must be a DNS subdomain`;
  if (!LABEL_NAME.test(name)) return `${describeValue(key)} is not a label key (at most 63 characters: letters, digits, "-", "_", ".", starting and ending with a letter or digit)`;
  return undefined;
}

/**
 * Reads a JSON list of label selectors (`[{matchLabels: {...}, matchExpressions: [...]}]`)
 * as the API server validates one: every problem is reported, by its place in the list.
 * An empty selector is refused: it would match every Pod.
 */
export function parseLabelSelectors(value: unknown): { readonly selectors: LabelSelector[]; readonly problems: string[] } {
  const problems: string[] = [];
  if (!Array.isArray(value)) return { selectors: [], problems: ['must be a JSON list of label selectors ([{"matchLabels": {...}}, ...])'] };
  const selectors = value.flatMap((item: unknown, index) => {
    const selector = parseLabelSelector(item, `[${index}]`, problems);
    return selector === undefined ? [] : [selector];
  });
  return { selectors, problems };
}

function parseLabelSelector(item: unknown, at: string, problems: string[]): LabelSelector | undefined {
  if (!isJsonObject(item)) {
    problems.push(`${at}: must be an object with matchLabels and/or matchExpressions`);
    return undefined;
  }
  const before = problems.length;
  for (const key of Object.keys(item)) if (key !== 'matchLabels' && key !== 'matchExpressions') problems.push(`${at}.${key}: unknown field (a label selector has matchLabels and matchExpressions)`);
  const matchLabels: Record<string, string> = {};
  const labels = own(item, 'matchLabels');
  if (labels !== undefined && !isJsonObject(labels)) problems.push(`${at}.matchLabels: must be a map of label keys to values`);
  for (const [key, label] of Object.entries(isJsonObject(labels) ? labels : {})) {
    const keyProblem = labelKeyProblem(key);
    if (keyProblem !== undefined) problems.push(`${at}.matchLabels: ${keyProblem}`);
    else if (typeof label !== 'string' || !LABEL_VALUE.test(label)) problems.push(`${at}.matchLabels.${key}: ${describeValue(label)} is not a label value`);
    else matchLabels[key] = label;
  }
  const expressions = own(item, 'matchExpressions');
  if (expressions !== undefined && !Array.isArray(expressions)) problems.push(`${at}.matchExpressions: must be a list`);
  const matchExpressions = (Array.isArray(expressions) ? expressions : []).flatMap((expression: unknown, index) => {
    const requirement = parseRequirement(expression, `${at}.matchExpressions[${index}]`, problems);
    return requirement === undefined ? [] : [requirement];
  });
  if (problems.length > before) return undefined;
  if (Object.keys(matchLabels).length === 0 && matchExpressions.length === 0) {
    problems.push(`${at}: an empty selector would match every Pod; give matchLabels or matchExpressions`);
    return undefined;
  }
  return { matchLabels, matchExpressions };
}

function parseRequirement(expression: unknown, at: string, problems: string[]): SelectorRequirement | undefined {
  if (!isJsonObject(expression)) {
    problems.push(`${at}: must be an object with key, operator and values`);
    return undefined;
  }
  const key = own(expression, 'key');
  const operator = own(expression, 'operator');
  const values = own(expression, 'values') ?? [];
  const before = problems.length;
  for (const field of Object.keys(expression)) if (!['key', 'operator', 'values'].includes(field)) problems.push(`${at}.${field}: unknown field`);
  if (typeof key !== 'string') problems.push(`${at}.key: required, a label key`);
  else {
    const keyProblem = labelKeyProblem(key);
    if (keyProblem !== undefined) problems.push(`${at}.key: ${keyProblem}`);
  }
  const known = SelectorOperators.find((name) => name === operator);
  if (known === undefined) problems.push(`${at}.operator: ${describeValue(operator)} is not one of ${SelectorOperators.join(', ')}`);
  if (!Array.isArray(values) || !values.every((v): v is string => typeof v === 'string' && LABEL_VALUE.test(v))) {
    problems.push(`${at}.values: must be a list of label values`);
  } else if ((known === 'In' || known === 'NotIn') && values.length === 0) {
    problems.push(`${at}.values: ${known} needs at least one value`);
  } else if ((known === 'Exists' || known === 'DoesNotExist') && values.length > 0) {
    problems.push(`${at}.values: ${known} takes no values`);
  }
  if (problems.length > before || typeof key !== 'string' || known === undefined || !Array.isArray(values)) return undefined;
  return { key, operator: known, values: values as string[] };
}

/** The standard semantics: every matchLabels pair and every requirement must hold. */
export function selectorMatches(selector: LabelSelector, labels: JsonObject | Readonly<Record<string, string>> | undefined): boolean {
  const value = (key: string): string | undefined => {
    const found = labels === undefined ? undefined : own(labels, key);
    return typeof found === 'string' ? found : undefined;
  };
  for (const [key, wanted] of Object.entries(selector.matchLabels)) if (value(key) !== wanted) return false;
  return selector.matchExpressions.every(({ key, operator, values }) => {
    const found = value(key);
    switch (operator) {
      case 'In':
        return found !== undefined && values.includes(found);
      case 'NotIn':
        return found === undefined || !values.includes(found);
      case 'Exists':
        return found !== undefined;
      case 'DoesNotExist':
        return found === undefined;
    }
  });
}

/** As kubectl writes a selector: `app=web,tier in (a,b),!legacy`. */
export function describeSelector(selector: LabelSelector): string {
  const parts = Object.entries(selector.matchLabels).map(([key, value]) => `${key}=${value}`);
  for (const { key, operator, values } of selector.matchExpressions) {
    parts.push(
      operator === 'In' ? `${key} in (${values.join(',')})`
      : operator === 'NotIn' ? `${key} notin (${values.join(',')})`
      : operator === 'Exists' ? key
      : `!${key}`,
    );
  }
  return parts.join(',');
}
