import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { ROOT } from './helpers/fixtures.js';
import { POD_FIELD_TYPES_PATH, renderPodFieldTypes } from './helpers/pod-field-types-source.js';

describe('the Pod field types the template check uses', () => {
  it(`${POD_FIELD_TYPES_PATH} is what @kubernetes/client-node's models give (UPDATE_GOLDEN=1 refreshes it)`, () => {
    const path = join(ROOT, POD_FIELD_TYPES_PATH);
    const expected = renderPodFieldTypes();
    if (process.env['UPDATE_GOLDEN'] === '1') writeFileSync(path, expected);
    assert.equal(readFileSync(path, 'utf8'), expected, `${POD_FIELD_TYPES_PATH} is stale: run UPDATE_GOLDEN=1 npm test`);
  });
});
