import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { parseSource } from './helpers/source-code.js';

// What a process loads is what it holds at rest (issue 39: RSS at rest in a
// cluster). A module reached only through `await import()` is loaded when that
// line runs; everything reached through static imports is loaded at start.
// These are the static import graphs of src/ as tsc emits them
// (verbatimModuleSyntax keeps `import { type X }` as a load; `import type` is gone).

const srcDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');

/** The src/ files FILE loads at once: its imports and re-exports that survive compilation, not `import()`. */
function staticImportsOf(file: string): string[] {
  const source = parseSource(file, readFileSync(join(srcDir, file), 'utf8'));
  const found: string[] = [];
  for (const statement of source.statements) {
    if (ts.isImportDeclaration(statement) && !statement.importClause?.isTypeOnly && ts.isStringLiteral(statement.moduleSpecifier)) found.push(statement.moduleSpecifier.text);
    if (ts.isExportDeclaration(statement) && !statement.isTypeOnly && statement.moduleSpecifier !== undefined && ts.isStringLiteral(statement.moduleSpecifier)) found.push(statement.moduleSpecifier.text);
  }
  return found.filter((specifier) => specifier.startsWith('.')).map((specifier) => posix.normalize(posix.join(posix.dirname(file), specifier)).replace(/\.js$/, '.ts'));
}

/** Every src/ file loaded at once when FILE is loaded, FILE included. */
function loadedWith(file: string): Set<string> {
  const seen = new Set<string>();
  const pending = [file];
  for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
    if (seen.has(next)) continue;
    seen.add(next);
    pending.push(...staticImportsOf(next));
  }
  return seen;
}

const COMMANDS = ['serve', 'inject', 'explain', 'status', 'policy', 'certs', 'check-capture', 'cni-agent'].map((name) => `commands/${name}.ts`);

describe('what a process loads at start', () => {
  it('the entry point loads no command: each is imported when it runs', () => {
    const loaded = loadedWith('main.ts');
    assert.deepEqual(COMMANDS.filter((command) => loaded.has(command)), []);
  });

  it('serve loads no other command, and in webhook mode neither the policy compiler nor its sync (cluster mode loads kube/index.ts)', () => {
    const loaded = new Set([...loadedWith('commands/serve.ts'), ...loadedWith('kube/index.ts')]);
    assert.deepEqual(COMMANDS.filter((command) => command !== 'commands/serve.ts' && loaded.has(command)), []);
    // The one policy/ file serve reads: which API version --policy-api accepts.
    assert.deepEqual([...loaded].filter((file) => file.startsWith('policy/') || file === 'kube/policy-sync.ts').sort(), ['policy/policy-api-version.ts']);
  });
});
