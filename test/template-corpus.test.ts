import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TemplateError } from '../src/errors.js';
import { parseTemplateData } from '../src/injection/index.js';
import { TEMPLATES_CORPUS } from './fixtures/templates-corpus.js';

/** Our verdict on each corpus template; the real-API-server tier checks the API server gives the same. */
function verdictOf(template: string): 'accept' | readonly string[] {
  try {
    parseTemplateData({ config: template });
    return 'accept';
  } catch (error) {
    assert.ok(error instanceof TemplateError, `expected a TemplateError, got ${String(error)}`);
    return error.problems;
  }
}

describe('template corpus: our verdicts', () => {
  it('holds at least 80 templates, valid and invalid, with unique names', () => {
    assert.ok(TEMPLATES_CORPUS.length >= 80, `${TEMPLATES_CORPUS.length} templates`);
    assert.equal(new Set(TEMPLATES_CORPUS.map((entry) => entry.name)).size, TEMPLATES_CORPUS.length);
    const accepted = TEMPLATES_CORPUS.filter((entry) => entry.expect === 'accept').length;
    assert.ok(accepted >= 25 && TEMPLATES_CORPUS.length - accepted >= 50, `${accepted} valid, ${TEMPLATES_CORPUS.length - accepted} invalid`);
  });

  for (const entry of TEMPLATES_CORPUS) {
    it(entry.name, () => {
      const verdict = verdictOf(entry.template);
      if (entry.expect === 'accept') {
        assert.equal(verdict, 'accept', `rejected:\n  ${Array.isArray(verdict) ? verdict.join('\n  ') : ''}`);
        return;
      }
      assert.notEqual(verdict, 'accept', 'accepted');
      const expected = `config: ${entry.expect.problem}`;
      assert.ok(
        Array.isArray(verdict) && verdict.some((problem: string) => problem.startsWith(expected)),
        `expected a problem starting with\n  ${expected}\ngot\n  ${Array.isArray(verdict) ? verdict.join('\n  ') : ''}`,
      );
    });
  }
});
