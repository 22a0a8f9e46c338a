import { applyPatch, type Operation } from 'rfc6902';

/**
 * Applies a JSON Patch with rfc6902, an implementation independent of
 * fast-json-patch (which `inject` and `explain` apply patches with), to a deep
 * copy; throws on the first failed operation.
 */
export function applyIndependently<T>(document: T, patch: readonly unknown[]): T {
  const copy = structuredClone(document);
  const results = applyPatch(copy, structuredClone(patch) as Operation[]);
  results.forEach((result, index) => {
    if (result !== null) throw new Error(`patch operation ${index} (${JSON.stringify(patch[index])}) failed: ${result.name}: ${result.message}`);
  });
  return copy;
}

