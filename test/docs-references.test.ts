import assert from 'node:assert/strict';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { CLI_REFERENCE_PATH, renderCliReference } from './helpers/cli-reference.js';
import { ROOT } from './helpers/fixtures.js';
import { METRICS_REFERENCE_PATH, renderMetricsReference } from './helpers/metrics-reference.js';
import { CHART_README_PATH, valueRows, withValuesTable } from './helpers/values-reference.js';

/**
 * The references that cannot drift: each is generated from what it
 * describes, and this test fails when the committed copy differs.
 * UPDATE_GOLDEN=1 rewrites them; review `git diff docs/ charts/`.
 */

const UPDATE = process.env['UPDATE_GOLDEN'] === '1';

function current(path: string): string {
  try {
    return readFileSync(join(ROOT, path), 'utf8');
  } catch {
    return '';
  }
}

function check(path: string, expected: string): void {
  if (UPDATE) {
    mkdirSync(dirname(join(ROOT, path)), { recursive: true });
    writeFileSync(join(ROOT, path), expected);
  }
  assert.equal(current(path), expected, `${path} is stale: UPDATE_GOLDEN=1 node --import tsx --test test/docs-references.test.ts rewrites it`);
}

describe('the generated references', () => {
  it(`${CLI_REFERENCE_PATH} is what every command prints for --help`, async () => {
    check(CLI_REFERENCE_PATH, await renderCliReference());
  });

  it(`the values table of ${CHART_README_PATH} is what the # -- comments of values.yaml say`, () => {
    check(CHART_README_PATH, withValuesTable(current(CHART_README_PATH)));
  });

  it('every value of values.yaml has a description of its own', () => {
    const rows = valueRows();
    assert.ok(rows.length > 60, `only ${rows.length} values`);
    assert.deepEqual(rows.filter((row) => row.description.length < 10).map((row) => row.path), []);
  });

  it(`${METRICS_REFERENCE_PATH} is what the metric registry holds`, () => {
    check(METRICS_REFERENCE_PATH, renderMetricsReference());
  });
});
