import { UsageError } from '../errors.js';
import { ALL_OVERRIDES, OVERRIDE_ANNOTATION_PREFIX, type OverrideName } from '../injection/index.js';

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

