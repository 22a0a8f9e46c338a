import { UsageError } from '../errors.js';
import { ALL_OVERRIDES, type OverrideName } from '../injection/index.js';

/** `proxy-cpu,proxy-memory` (with or without the envoy-injector.io/ prefix), or `none`. */
export function parseAllowedOverrides(value: string | undefined): OverrideName[] {
  if (value === undefined || value.trim() === '' || value.trim() === 'none') return [];
  return value.split(',').map((item) => {
    const name = item.trim().replace(/^envoy-injector\.io\//, '');
    const known = ALL_OVERRIDES.find((override) => override === name);
    if (known === undefined) throw new UsageError(`--allowed-overrides: "${item.trim()}" is not one of ${ALL_OVERRIDES.join(', ')}`);
    return known;
  });
}

