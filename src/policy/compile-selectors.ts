import type { LabelSelector } from '../injection/index.js';
import { celString, celValue } from './cel-literal.js';

/** The Pod's labels, where `variables` are not yet defined (match conditions). */
export const POD_LABELS = '(has(object.metadata.labels) ? object.metadata.labels : {})';

/**
 * A label selector as a CEL boolean over the label map `labels`, with the
 * standard semantics (docs/design.md §4, `selectorMatches`): every
 * matchLabels pair and every requirement must hold.
 */
export function selectorCel(selector: LabelSelector, labels: string): string {
  const has = (key: string): string => `${celString(key)} in ${labels}`;
  const value = (key: string): string => `${labels}[${celString(key)}]`;
  const parts = Object.entries(selector.matchLabels).map(([key, wanted]) => `(${has(key)} && ${value(key)} == ${celString(wanted)})`);
  for (const { key, operator, values } of selector.matchExpressions) {
    parts.push(
      operator === 'In' ? `(${has(key)} && ${value(key)} in ${celValue([...values])})`
      : operator === 'NotIn' ? `(!(${has(key)}) || !(${value(key)} in ${celValue([...values])}))`
      : operator === 'Exists' ? `(${has(key)})`
      : `!(${has(key)})`,
    );
  }
  return parts.join(' && ');
}

/** True when any of the selectors matches; undefined for none. */
export function anySelectorCel(selectors: readonly LabelSelector[] | undefined, labels: string): string | undefined {
  if (selectors === undefined || selectors.length === 0) return undefined;
  return selectors.map((selector) => `(${selectorCel(selector, labels)})`).join(' || ');
}
