import jsonpatch from 'fast-json-patch';
import { PatchError } from '../../errors.js';
import type { JsonObject } from '../basics/index.js';
import type { PatchOperation } from './inject-pod.js';

// fast-json-patch's named exports type-check but fail at run time under Node ESM: use the default export.
const { applyPatch, JsonPatchError } = jsonpatch;

/**
 * The injected object, obtained as the API server obtains it: by applying the
 * patch to what was received. The patch is the merge's one output, so what
 * `inject` and `explain` show cannot drift from what the webhook answers.
 * Each operation is validated; `pod` is copied, never mutated.
 */
export function applyPodPatch(pod: JsonObject, patch: readonly PatchOperation[]): JsonObject {
  try {
    // Our own copy: the library's is a JSON round trip, which turns -0 into 0 and YAML's .inf into null.
    return applyPatch(structuredClone(pod), patch, true, true).newDocument;
  } catch (error) {
    if (!(error instanceof JsonPatchError)) throw error;
    // The library's message goes on with the whole document: keep its first line and name the operation.
    const operation = error.index === undefined ? undefined : patch[error.index];
    const where = operation === undefined ? '' : ` at operation ${String(error.index)} (${operation.op} ${operation.path})`;
    throw new PatchError(`the patch does not apply to the Pod${where}: ${error.name}: ${error.message.split('\n')[0] ?? ''}`, { cause: error });
  }
}
