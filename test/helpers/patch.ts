import jsonpatch from 'fast-json-patch';
import { applyPatch, type Operation } from 'rfc6902';

/**
 * Applies a JSON Patch with rfc6902, an implementation independent of ours and
 * of fast-json-patch, to a deep copy; throws on the first failed operation.
 */
export function applyIndependently<T>(document: T, patch: readonly unknown[]): T {
  const copy = structuredClone(document);
  const results = applyPatch(copy, structuredClone(patch) as Operation[]);
  results.forEach((result, index) => {
    if (result !== null) throw new Error(`patch operation ${index} (${JSON.stringify(patch[index])}) failed: ${result.name}: ${result.message}`);
  });
  return copy;
}

/**
 * The same with fast-json-patch, a second conforming implementation (through
 * its default export: its named exports fail at run time under Node ESM).
 */
export function applyWithFastJsonPatch<T>(document: T, patch: readonly unknown[]): T {
  const { applyPatch: apply, validate } = jsonpatch;
  const operations = structuredClone(patch) as jsonpatch.Operation[];
  const copy = structuredClone(document);
  const error = validate(operations, copy);
  if (error !== undefined) throw new Error(`fast-json-patch rejects the patch: ${error.name}: ${error.message}`);
  return apply(copy, operations, true, true).newDocument;
}
