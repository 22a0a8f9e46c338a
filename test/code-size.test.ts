import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { parseSource, sourceFiles } from './helpers/source-code.js';

// What a newcomer can take in at once (docs/design.md §2): a file of src/ or
// bench/ within MAX_FILE_LINES, a function within MAX_FUNCTION_LINES, a
// folder of src/ within MAX_FOLDER_FILES source files at its own level.
const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 80;
const MAX_FOLDER_FILES = 24;
// Generated from the Pod's OpenAPI types: data, not code to read.
const FUNCTION_RULE_EXCEPTIONS = new Set(['src/injection/template/pod-field-types.ts']);

const root = join(dirname(fileURLToPath(import.meta.url)), '..');

/** Lines as `wc -l` counts them: a final newline ends the last line, it does not start one. */
function lineCount(text: string): number {
  const lines = text.split('\n').length;
  return text.endsWith('\n') ? lines - 1 : lines;
}

/** `file: N lines` when the file is longer than allowed. */
function fileTooLong(file: string, text: string): string[] {
  const lines = lineCount(text);
  return lines > MAX_FILE_LINES ? [`${file}: ${lines} lines, more than ${MAX_FILE_LINES}: split it along its seams`] : [];
}

/** The name a function goes by: its own, or the variable, property or class member it is assigned to. */
function functionName(node: ts.FunctionLikeDeclaration, source: ts.SourceFile): string {
  if (node.name !== undefined) return node.name.getText(source);
  if (ts.isConstructorDeclaration(node)) return 'constructor';
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name !== undefined) return parent.name.getText(source);
  return '<anonymous>';
}

/** `file:line name: N lines` for every function (declaration, method, accessor, arrow, expression) longer than allowed. */
function functionsTooLong(file: string, text: string): string[] {
  const source = parseSource(file, text);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isFunctionLike(node) && 'body' in node && node.body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const lines = last - first + 1;
      if (lines > MAX_FUNCTION_LINES) found.push(`${file}:${first + 1} ${functionName(node as ts.FunctionLikeDeclaration, source)}: ${lines} lines, more than ${MAX_FUNCTION_LINES}`);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** `folder/: N files` for every folder holding more source files of its own than allowed. */
function foldersTooFull(files: readonly string[]): string[] {
  const counts = new Map<string, number>();
  for (const file of files) {
    const folder = file.slice(0, file.lastIndexOf('/') + 1);
    counts.set(folder, (counts.get(folder) ?? 0) + 1);
  }
  return [...counts].filter(([, count]) => count > MAX_FOLDER_FILES).map(([folder, count]) => `${folder}: ${count} files, more than ${MAX_FOLDER_FILES}: cut it into rooms by concern`);
}

function filesOf(dir: string): { file: string; text: string }[] {
  return sourceFiles(join(root, dir)).map((file) => ({ file: `${dir}/${file}`, text: readFileSync(join(root, dir, file), 'utf8') }));
}

describe('size of the code', () => {
  const files = [...filesOf('src'), ...filesOf('bench')];

  it(`no file of src/ or bench/ is over ${MAX_FILE_LINES} lines`, () => {
    assert.ok(files.length > 40, `expected src/ and bench/, found ${files.length} files`);
    assert.deepEqual(files.flatMap(({ file, text }) => fileTooLong(file, text)), []);
  });

  it(`no function of src/ or bench/ is over ${MAX_FUNCTION_LINES} lines (generated code excepted)`, () => {
    const checked = files.filter(({ file }) => !FUNCTION_RULE_EXCEPTIONS.has(file));
    assert.deepEqual(checked.flatMap(({ file, text }) => functionsTooLong(file, text)), []);
  });

  it(`no folder of src/ holds more than ${MAX_FOLDER_FILES} source files of its own`, () => {
    assert.deepEqual(foldersTooFull(files.map(({ file }) => file).filter((file) => file.startsWith('src/'))), []);
  });

  it('the exceptions exist: a stale one would hide nothing and mislead', () => {
    for (const file of FUNCTION_RULE_EXCEPTIONS) assert.ok(files.some((entry) => entry.file === file), `${file} is excepted but gone`);
  });

  // The checks themselves must catch what they are for.
  const body = (lines: number): string => Array.from({ length: lines - 2 }, (_, index) => `  const v${index} = ${index};`).join('\n');

  it('refuses a file one line too long, accepts one at the limit', () => {
    assert.match(fileTooLong('src/x.ts', 'const a = 1;\n'.repeat(MAX_FILE_LINES + 1)).join(''), /src\/x\.ts: 401 lines, more than 400/);
    assert.deepEqual(fileTooLong('src/x.ts', 'const a = 1;\n'.repeat(MAX_FILE_LINES)), []);
  });

  it('refuses a folder one file too full, counting only its own level', () => {
    const folder = (count: number, at: string): string[] => Array.from({ length: count }, (_, index) => `${at}f${index}.ts`);
    assert.deepEqual(foldersTooFull([...folder(MAX_FOLDER_FILES + 1, 'src/room/'), ...folder(MAX_FOLDER_FILES, 'src/ok/')]), ['src/room/: 25 files, more than 24: cut it into rooms by concern']);
    assert.deepEqual(foldersTooFull([...folder(MAX_FOLDER_FILES, 'src/room/'), ...folder(MAX_FOLDER_FILES, 'src/room/inner/')]), []);
  });

  it('refuses every kind of function one line too long, naming it and its line', () => {
    const long = body(MAX_FUNCTION_LINES + 1);
    const text = [
      `function declared(): void {\n${long}\n}`,
      `export const arrow = (): void => {\n${long}\n};`,
      `const expressed = function (): void {\n${long}\n};`,
      `class Holder {\n  method(): void {\n${long}\n  }\n  get value(): number {\n${long}\n    return 1;\n  }\n  constructor() {\n${long}\n  }\n}`,
      `export const table = { entry: (): void => {\n${long}\n} };`,
    ].join('\n');
    const found = functionsTooLong('src/x.ts', text).join('\n');
    for (const name of ['declared', 'arrow', 'expressed', 'method', 'value', 'constructor', 'entry']) assert.match(found, new RegExp(`src/x\\.ts:\\d+ ${name}: 8[12] lines`));
    assert.match(found, /^src\/x\.ts:1 declared: 81 lines/);
  });

  it('accepts a function at the limit, and a long function type or object that is no function', () => {
    const text = [`function fits(): void {\n${body(MAX_FUNCTION_LINES)}\n}`, `type Shape = {\n${'  a: number;\n'.repeat(MAX_FUNCTION_LINES + 1)}};`, `const data = {\n${'  a: 1,\n'.repeat(MAX_FUNCTION_LINES + 1)}};`].join('\n');
    assert.deepEqual(functionsTooLong('src/x.ts', text), []);
  });
});
