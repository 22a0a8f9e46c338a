import { describeValue, isJsonObject, quantityProblem, type JsonValue } from '../basics/index.js';
import { POD_FIELD_TYPES } from './pod-field-types.js';

const INT32 = 2 ** 31;

/**
 * Problems of `value` against a type of the Pod's OpenAPI schema (see
 * pod-field-types.ts), as `path: problem`: what the API server's strict JSON
 * decoding refuses (a string for an integer, a number for a string, ...) and
 * unknown fields, which a patch would lose without a word. `null` is allowed
 * anywhere, as Go's decoder reads it as "unset".
 */
export function findTypeProblems(value: JsonValue, type: string, path: string): string[] {
  const problems: string[] = [];
  checkType(value, type, path, problems);
  return problems;
}

function checkType(value: JsonValue, type: string, path: string, problems: string[]): void {
  if (value === null) return;
  const add = (problem: string): void => {
    problems.push(`${path}: ${problem}, got ${describeValue(value)}`);
  };
  if (type.endsWith('[]')) {
    if (!Array.isArray(value)) add('must be a list');
    else value.forEach((item, index) => checkType(item, type.slice(0, -2), `${path}[${index}]`, problems));
    return;
  }
  if (type.startsWith('map<')) {
    if (!isJsonObject(value)) add('must be a mapping');
    else for (const [key, item] of Object.entries(value)) checkType(item, type.slice(4, -1), `${path}.${key}`, problems);
    return;
  }
  switch (type) {
    case 'any':
      return;
    case 'string':
      if (typeof value !== 'string') add('must be a string (quote numbers and booleans)');
      return;
    case 'boolean':
      if (typeof value !== 'boolean') add('must be true or false');
      return;
    case 'number':
      if (typeof value !== 'number') add('must be a number');
      return;
    case 'int32':
    case 'int64':
      if (!isInteger(value, type === 'int32' ? INT32 : 2 ** 63)) add(`must be an integer${type === 'int32' ? ' (32-bit)' : ''}`);
      return;
    case 'int-or-string':
      if (typeof value !== 'string' && !isInteger(value, INT32)) add('must be an integer or a string');
      return;
    case 'quantity': {
      const problem = quantityProblem(value);
      if (problem !== undefined) problems.push(`${path}: ${problem}`);
      return;
    }
  }
  const fields = POD_FIELD_TYPES[type];
  // Every type the generated table names is in it (its test checks that); nothing to check otherwise.
  if (fields === undefined) return;
  if (!isJsonObject(value)) {
    add('must be a mapping');
    return;
  }
  for (const [key, item] of Object.entries(value)) {
    const fieldType = Object.hasOwn(fields, key) ? fields[key] : undefined;
    if (fieldType === undefined) problems.push(`${path}.${key}: unknown field${suggestion(key, fields)}`);
    else checkType(item, fieldType, `${path}.${key}`, problems);
  }
}

function isInteger(value: JsonValue, bound: number): boolean {
  return typeof value === 'number' && Number.isInteger(value) && value >= -bound && value < bound;
}

/** A hint for a field written with the wrong case, the commonest typo (`configmap`, `mountpath`). */
function suggestion(key: string, fields: Readonly<Record<string, string>>): string {
  const match = Object.keys(fields).find((field) => field.toLowerCase() === key.toLowerCase());
  return match === undefined ? '' : ` (did you mean ${match}?)`;
}
