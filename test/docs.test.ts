import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commandHelps, definedFlags } from './helpers/cli-reference.js';
import { checkLinks } from './helpers/docs-links.js';
import { codeOf, docText, handWrittenDocs, markdownFiles, userDocs } from './helpers/docs-markdown.js';
import { chartValues, definedKeys, flagProblems, keyProblems, keysToDocument, metricProblems, reasonsToDocument, snakeProblems, valueProblems, type NameProblem } from './helpers/doc-names.js';
import { cniAgentMetrics, injectorMetrics, seriesNames } from './helpers/metrics-reference.js';

/**
 * The docs as a reader meets them: every link leads somewhere, every name a
 * page writes is one the code has, and every name the code defines is
 * explained on a page written by hand (or, for flags, values and metrics,
 * in a generated reference: test/docs-references.test.ts).
 */

function report(problems: readonly NameProblem[]): string[] {
  return problems.map((problem) => `${problem.file}:${problem.line} ${problem.name}: ${problem.why}`);
}

describe('the docs', () => {
  it('every relative link and heading anchor resolves (remark-validate-links)', async () => {
    const problems = await checkLinks(markdownFiles());
    assert.deepEqual(problems.map((problem) => `${problem.file}:${problem.line} ${problem.message}`), []);
  });

  it('every flag a page writes is a flag of the command it is given to', async () => {
    const flags = new Map([...(await commandHelps())].map(([command, help]) => [command, definedFlags(help)]));
    assert.deepEqual(report(flagProblems(userDocs().flatMap(codeOf), flags)), []);
  });

  it('every chart value a page writes is in values.yaml', () => {
    assert.deepEqual(report(valueProblems(userDocs().flatMap(codeOf), chartValues())), []);
  });

  it('every envoy-injector.io/ annotation or label and every envoy_injector_ metric a page writes exists', () => {
    const keys = definedKeys();
    const series = seriesNames([...injectorMetrics(), ...cniAgentMetrics()]);
    const problems = markdownFiles().flatMap((file) => [...keyProblems(file, docText(file), keys), ...metricProblems(file, docText(file), series)]);
    assert.deepEqual(report(problems), []);
  });

  it('every snake_case name a page writes is a reason of ours (or named as another program\'s)', () => {
    assert.deepEqual(report(snakeProblems(userDocs().flatMap(codeOf))), []);
  });

  it('every annotation and label the code defines is explained on a page written by hand', () => {
    const text = handWrittenDocs().map(docText).join('\n');
    assert.deepEqual(keysToDocument().filter((key) => !text.includes(key)), []);
  });

  it('every reason, Event reason and rule of the decision is named in code on a page written by hand', () => {
    const spans = new Set(handWrittenDocs().flatMap(codeOf).filter((item) => item.kind === 'inline').map((item) => item.text));
    assert.deepEqual(reasonsToDocument().filter((name) => !spans.has(name)), []);
  });
});
