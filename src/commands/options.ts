import { UsageError } from '../errors.js';
import { ALL_OVERRIDES, OVERRIDE_ANNOTATION_PREFIX, parseLabelSelectors, type LabelSelector, type OverrideName } from '../injection/index.js';

/** `proxy-cpu,proxy-memory` (with or without the envoy-injector.io/ prefix), or `none`. */
export function parseAllowedOverrides(value: string | undefined): OverrideName[] {
  if (value === undefined || value.trim() === '' || value.trim() === 'none') return [];
  return value.split(',').map((item) => {
    const trimmed = item.trim();
    const name = trimmed.startsWith(OVERRIDE_ANNOTATION_PREFIX) ? trimmed.slice(OVERRIDE_ANNOTATION_PREFIX.length) : trimmed;
    const known = ALL_OVERRIDES.find((override) => override === name);
    if (known === undefined) throw new UsageError(`--allowed-overrides: "${trimmed}" is not one of ${ALL_OVERRIDES.join(', ')}`);
    return known;
  });
}

/** A flag's whole number from MIN to MAX (digits only: no sign, fraction or exponent); else a usage error naming the flag. */
export function parseInteger(value: string | undefined, flag: string, min: number, max: number): number {
  const number = Number(value);
  if (value === undefined || !/^\d+$/.test(value) || number < min || number > max) throw new UsageError(`${flag}: must be an integer from ${min} to ${max}`);
  return number;
}

/**
 * A JSON list of Pod label selectors (`--never-inject-selector`,
 * `--always-inject-selector`): a bad one is a usage error naming the flag
 * and every problem, so the injector never starts with a selector it misreads.
 */
export function parseSelectorsOption(flag: string, json: string | undefined): LabelSelector[] {
  if (json === undefined || json.trim() === '') return [];
  let value: unknown;
  try {
    value = JSON.parse(json);
  } catch (error) {
    throw new UsageError(`${flag}: not JSON (${(error as Error).message}); expected a list of label selectors, e.g. [{"matchLabels":{"app":"db"}}]`);
  }
  const { selectors, problems } = parseLabelSelectors(value);
  if (problems.length > 0) throw new UsageError(`${flag}: ${problems.join('; ')}`);
  return selectors;
}
