import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { ListItemStream } from '../src/kube/api/list-items.js';

/** Streams TEXT cut at CUTS; the items handed over and what end() returns. */
function stream(text: string, cuts: readonly number[] = []): { items: unknown[]; rest: unknown } {
  const items: unknown[] = [];
  const list = new ListItemStream((item) => items.push(item));
  let from = 0;
  for (const cut of [...new Set(cuts)].filter((at) => at > 0 && at < text.length).sort((a, b) => a - b)) {
    list.write(text.slice(from, cut));
    from = cut;
  }
  list.write(text.slice(from));
  return { items, rest: list.end() };
}

/** What JSON.parse makes of a list, split the way the stream splits it. */
function expected(text: string): { items: unknown[]; rest: unknown } {
  const parsed = JSON.parse(text) as Record<string, unknown>;
  if (!Array.isArray(parsed['items'])) return { items: [], rest: parsed };
  return { items: parsed['items'] as unknown[], rest: { ...parsed, items: [] } };
}

const TRICKY = [
  { metadata: { name: 'a', annotations: { 'x/quote': 'say "hi"', 'x/slash': 'C:\\dir\\', 'x/both': '\\"', items: '[{' } }, spec: { items: [1, [2], { items: [] }] } },
  { metadata: { name: 'é 漢字 🚀', labels: {} }, list: [], nested: [[[]]], empty: {}, n: -1.5e3, t: true, f: false, z: null },
  { metadata: { name: 'c' }, text: '}]},{"items":[' },
];

describe('ListItemStream: a Kubernetes list read item by item as it arrives', () => {
  it('hands over each item of items, parsed alone, and returns the rest with items empty', () => {
    const text = JSON.stringify({ kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: '7', continue: 'abc' }, items: TRICKY });
    assert.deepEqual(stream(text), expected(text));
    assert.deepEqual(stream(text).rest, { kind: 'PodList', apiVersion: 'v1', metadata: { resourceVersion: '7', continue: 'abc' }, items: [] });
  });

  it('the same however the text is cut: one character at a time, in a string, between a backslash and what it escapes', () => {
    const text = JSON.stringify({ metadata: {}, items: TRICKY }, null, 2);
    const everywhere = Array.from({ length: text.length }, (_, index) => index);
    assert.deepEqual(stream(text, everywhere), expected(text));
    for (const [index, char] of [...text].entries()) if (char === '\\') assert.deepEqual(stream(text, [index + 1]), expected(text), `cut after the backslash at ${index}`);
  });

  it('items first, last, empty, absent or not an array; members after items are kept', () => {
    for (const list of [
      { items: TRICKY, metadata: { continue: 'x' } },
      { metadata: {}, items: [] },
      { metadata: { continue: '' } },
      { items: null, metadata: {} },
      { items: { a: 1 }, kind: 'List' },
      { kind: 'List', items: [1, 'two', [3], null, { four: 4 }], after: { items: [5] } },
    ]) {
      for (const text of [JSON.stringify(list), JSON.stringify(list, null, 4)]) assert.deepEqual(stream(text, [1, 7, 20]), expected(text), text);
    }
  });

  it('any list, cut anywhere: what JSON.parse makes of it', () => {
    const list = fc.record({ metadata: fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })), items: fc.array(fc.jsonValue({ maxDepth: 4 }), { maxLength: 6 }), kind: fc.string() });
    fc.assert(
      fc.property(list, fc.boolean(), fc.array(fc.nat(), { maxLength: 8 }), (value, indent, cuts) => {
        const text = JSON.stringify(value, null, indent ? 2 : undefined);
        assert.deepEqual(stream(text, cuts.map((cut) => cut % (text.length + 1))), expected(text));
      }),
      { numRuns: 300 },
    );
  });

  it('keeps only the item being received: the text held never grows with the page', () => {
    const item = { metadata: { name: 'x'.repeat(1000) }, spec: { containers: [{ args: ['a "b" \\ c'.repeat(100)] }] } };
    const text = JSON.stringify({ metadata: { continue: 'c' }, items: Array.from({ length: 2000 }, () => item) });
    let handed = 0;
    let held = 0;
    const list = new ListItemStream(() => (handed += 1));
    for (let at = 0; at < text.length; at += 16_384) {
      list.write(text.slice(at, at + 16_384));
      held = Math.max(held, list.heldLength);
    }
    assert.deepEqual(list.end(), { metadata: { continue: 'c' }, items: [] });
    assert.equal(handed, 2000);
    assert.ok(held < 16_384 + 2 * JSON.stringify(item).length, `held ${held} characters of ${text.length}`);
  });

  it('a list cut short or an item that is not JSON is an error, never a shorter list', () => {
    const text = JSON.stringify({ metadata: {}, items: TRICKY });
    for (const end of [text.length - 1, text.length - 3, Math.floor(text.length / 2), 1]) {
      const list = new ListItemStream(() => undefined);
      list.write(text.slice(0, end));
      assert.throws(() => list.end(), SyntaxError, `cut at ${end}`);
    }
    assert.throws(() => stream('{"items":[{"a":1},{"a":tru}]}'), SyntaxError);
    assert.throws(() => stream('{"items":[{"a":1},],"metadata":{}}'), SyntaxError);
    assert.throws(() => stream('{"metadata":{,},"items":[]}'), SyntaxError);
  });
});
