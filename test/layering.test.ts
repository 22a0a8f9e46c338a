import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, posix } from 'node:path';
import { describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { importsOf, parseSource, sourceFiles } from './helpers/source-code.js';

// The rooms of src/ and which way they point (docs/design.md draws it). A
// room imports its own files and rooms of a lower rank only: never one of
// its rank (server/ and kube/ stand side by side) nor one above.
const RANK: Readonly<Record<string, number>> = {
  main: 7,
  cni: 3,
  cli: 6,
  commands: 5,
  server: 4,
  kube: 4,
  admission: 3,
  state: 3,
  policy: 3,
  fleet: 3,
  events: 3,
  injection: 2,
  tls: 2,
  errors: 1,
};

// Packages and Node modules a room may import. Rooms not listed may import any.
const PURE = ['node:crypto', 'js-yaml', 'fast-json-patch'];
const ALLOWED_PACKAGES: Readonly<Record<string, readonly string[]>> = {
  injection: PURE,
  policy: PURE,
  fleet: PURE,
  events: PURE,
  cni: [],
  // Reading PEM files is the only I/O of tls/.
  tls: ['node:crypto', 'node:net', 'node:tls', 'node:fs/promises', 'selfsigned'],
  state: ['pino'],
  admission: ['@sinclair/typebox'],
  errors: [],
};
// Packages a room must not import, for rooms that may import most things.
const FORBIDDEN_PACKAGES: Readonly<Record<string, readonly string[]>> = {
  kube: ['fastify', 'prom-client'],
  server: ['@kubernetes/client-node'],
};
// The pure rooms touch no process, clock, timer, console or randomness.
const PURE_ROOMS = new Set(['injection', 'policy', 'fleet', 'events']);
const AMBIENT = new Set(['process', 'setTimeout', 'setInterval', 'setImmediate', 'fetch', 'performance', 'console', 'require', 'globalThis']);

const srcDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');

/** A folder of src/, or a top-level file by its name without extension (`cli`, `errors`). */
function roomOf(file: string): string {
  return (file.split('/')[0] ?? file).replace(/\.[jt]s$/, '');
}

/** Uses of the process, the clock, timers and randomness: what a pure room must not reach. */
function ambientUsesOf(file: string, text: string): string[] {
  const source = parseSource(file, text);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isIdentifier(node) && AMBIENT.has(node.text) && isFreeReference(node)) {
      found.push(node.text);
    } else if (ts.isPropertyAccessExpression(node) && ts.isIdentifier(node.expression)) {
      const name = `${node.expression.text}.${node.name.text}`;
      if (name === 'Date.now' || name === 'Math.random') found.push(name);
    } else if (ts.isNewExpression(node) && ts.isIdentifier(node.expression) && node.expression.text === 'Date' && (node.arguments?.length ?? 0) === 0) {
      found.push('new Date()');
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** An identifier read as a variable, not a property name, a key or a declaration. */
function isFreeReference(node: ts.Identifier): boolean {
  const parent = node.parent;
  if (ts.isPropertyAccessExpression(parent) && parent.name === node) return false;
  if ((ts.isPropertyAssignment(parent) || ts.isPropertySignature(parent) || ts.isPropertyDeclaration(parent) || ts.isMethodDeclaration(parent)) && parent.name === node) return false;
  if ((ts.isVariableDeclaration(parent) || ts.isParameter(parent) || ts.isFunctionDeclaration(parent)) && parent.name === node) return false;
  return true;
}

/** The layering rules broken by one file of src/ (`file` relative to src/, with `/`). */
function layeringViolations(file: string, text: string): string[] {
  const room = roomOf(file);
  const rank = RANK[room];
  if (rank === undefined) return [`src/${file}: room ${room} has no place in the layering; add it to RANK in test/layering.test.ts and to docs/design.md`];
  const violations: string[] = [];
  for (const specifier of importsOf(file, text)) {
    if (specifier.startsWith('.')) {
      const target = posix.normalize(posix.join(posix.dirname(file), specifier));
      const targetRoom = roomOf(target);
      if (target.startsWith('..')) {
        violations.push(`src/${file} imports ${specifier}, outside src/`);
      } else if (targetRoom !== room && !((RANK[targetRoom] ?? Infinity) < rank)) {
        violations.push(`src/${file} imports src/${target}: ${room} may import only rooms below it, not ${targetRoom}`);
      }
      continue;
    }
    const allowed = ALLOWED_PACKAGES[room];
    if (allowed !== undefined && !allowed.includes(specifier)) {
      violations.push(`src/${file} imports ${specifier}: ${room} may import only ${allowed.join(', ') || 'nothing outside src/'}`);
    }
    if (FORBIDDEN_PACKAGES[room]?.includes(specifier) === true) {
      violations.push(`src/${file} imports ${specifier}, which ${room} must not use`);
    }
  }
  if (PURE_ROOMS.has(room)) {
    for (const use of ambientUsesOf(file, text)) violations.push(`src/${file} uses ${use}: ${room} is pure (no process, clock, timers or I/O)`);
  }
  return violations;
}

/** The files of src/ each file imports (relative imports resolved, `.js` read as `.ts`), from the files' texts. */
function importGraph(texts: ReadonlyMap<string, string>): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const [file, text] of texts) {
    const targets = importsOf(file, text)
      .filter((specifier) => specifier.startsWith('.'))
      .map((specifier) => posix.normalize(posix.join(posix.dirname(file), specifier)).replace(/\.js$/, '.ts'))
      .filter((target) => texts.has(target));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

/**
 * Every circle of the graph, one per strongly connected component (Tarjan),
 * as the files it goes through, the first repeated at the end.
 */
function importCycles(graph: ReadonlyMap<string, readonly string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const cycles: string[][] = [];
  const connect = (file: string): void => {
    index.set(file, index.size);
    low.set(file, index.get(file) ?? 0);
    stack.push(file);
    onStack.add(file);
    for (const target of graph.get(file) ?? []) {
      if (!index.has(target)) {
        connect(target);
        low.set(file, Math.min(low.get(file) ?? 0, low.get(target) ?? 0));
      } else if (onStack.has(target)) {
        low.set(file, Math.min(low.get(file) ?? 0, index.get(target) ?? 0));
      }
    }
    if (low.get(file) !== index.get(file)) return;
    const component = new Set<string>();
    for (let member = stack.pop(); member !== undefined; member = stack.pop()) {
      onStack.delete(member);
      component.add(member);
      if (member === file) break;
    }
    if (component.size > 1 || (graph.get(file) ?? []).includes(file)) cycles.push(cycleThrough(file, component, graph));
  };
  for (const file of graph.keys()) if (!index.has(file)) connect(file);
  return cycles;
}

/** A path from START back to it within COMPONENT (one exists: every member reaches every other). */
function cycleThrough(start: string, component: ReadonlySet<string>, graph: ReadonlyMap<string, readonly string[]>): string[] {
  const cameFrom = new Map<string, string>();
  const queue = [start];
  for (let file = queue.shift(); file !== undefined; file = queue.shift()) {
    for (const target of graph.get(file) ?? []) {
      if (!component.has(target)) continue;
      if (target === start) {
        const path = [file];
        for (let step = cameFrom.get(file); step !== undefined; step = cameFrom.get(step)) path.unshift(step);
        return [...path, start];
      }
      if (!cameFrom.has(target)) {
        cameFrom.set(target, file);
        queue.push(target);
      }
    }
  }
  throw new Error(`${start}: no path back within its component`);
}

describe('layering of src/', () => {
  it('every file of src/ keeps to the rules of its room', () => {
    const files = sourceFiles(srcDir);
    assert.ok(files.length > 20, `expected the whole of src/, found ${files.length} files`);
    const violations = files.flatMap((file) => layeringViolations(file, readFileSync(join(srcDir, file), 'utf8')));
    assert.deepEqual(violations, []);
  });

  it('no file of src/ imports itself back, through any number of files (type imports included)', () => {
    const texts = new Map(sourceFiles(srcDir).map((file) => [file, readFileSync(join(srcDir, file), 'utf8')]));
    const cycles = importCycles(importGraph(texts)).map((cycle) => cycle.map((file) => `src/${file}`).join(' -> '));
    assert.deepEqual(cycles, []);
  });

  it('finds a circle of imports and names its files, and no circle where there is none', () => {
    const texts = new Map([
      ['commands/serve.ts', "import { startPolicyController } from './policy-controller.js';\nimport { x } from '../kube/index.js';"],
      ['commands/policy-controller.ts', "import type { ServeSettings } from './serve.js';"],
      ['kube/index.ts', "export { a } from './a.js';"],
      ['kube/a.ts', "type K = typeof import('./b.js');"],
      ['kube/b.ts', "const k = await import('./a.js');"],
      ['state/store.ts', "import { x } from '../kube/index.js';\nimport { y } from './store.js';"],
    ]);
    const cycles = importCycles(importGraph(texts)).map((cycle) => cycle.join(' -> ')).sort();
    assert.deepEqual(cycles, ['commands/serve.ts -> commands/policy-controller.ts -> commands/serve.ts', 'kube/a.ts -> kube/b.ts -> kube/a.ts', 'state/store.ts -> state/store.ts']);
    texts.set('commands/policy-controller.ts', "import type { ServeSettings } from './serve-settings.js';");
    texts.delete('kube/b.ts');
    texts.set('state/store.ts', "import { x } from '../kube/index.js';");
    assert.deepEqual(importCycles(importGraph(texts)), []);
  });

  it('src/kube imports nothing from src/server', () => {
    const kubeFiles = sourceFiles(srcDir).filter((file) => file.startsWith('kube/'));
    assert.ok(kubeFiles.length > 0, 'expected files in src/kube');
    for (const file of kubeFiles) {
      const imports = importsOf(file, readFileSync(join(srcDir, file), 'utf8'));
      const intoServer = imports.filter((specifier) => specifier.startsWith('.') && posix.join(posix.dirname(file), specifier).startsWith('server/'));
      assert.deepEqual(intoServer, [], `src/${file} imports src/server`);
    }
  });

  // The checker itself must catch what it is for; these are the breaks it exists to refuse.
  const breaks: { name: string; file: string; text: string; expected: RegExp }[] = [
    { name: 'kube importing server', file: 'kube/x.ts', text: "import { a } from '../server/serve.js';", expected: /kube may import only rooms below it, not server/ },
    { name: 'server importing kube', file: 'server/x.ts', text: "import type { A } from '../kube/index.js';", expected: /not kube/ },
    { name: 'a lower room importing a higher one', file: 'tls/x.ts', text: "export { a } from '../state/template-store.js';", expected: /tls may import only rooms below it, not state/ },
    { name: 'injection importing fastify', file: 'injection/x.ts', text: "import fastify from 'fastify';", expected: /imports fastify: injection may import only/ },
    { name: 'injection importing client-node', file: 'injection/x.ts', text: "const k = await import('@kubernetes/client-node');", expected: /imports @kubernetes\/client-node/ },
    { name: 'injection importing node:fs', file: 'injection/x.ts', text: "type F = typeof import('node:fs');", expected: /imports node:fs/ },
    { name: 'injection reading process', file: 'injection/x.ts', text: 'export const env = process.env.HOME;', expected: /uses process/ },
    { name: 'injection reading the clock', file: 'injection/x.ts', text: 'export const t = Date.now() + new Date().getTime();', expected: /uses Date\.now[\s\S]*uses new Date\(\)/ },
    { name: 'injection starting a timer', file: 'injection/x.ts', text: 'setTimeout(() => undefined, 1);', expected: /uses setTimeout/ },
    { name: 'tls importing an HTTP server', file: 'tls/x.ts', text: "import { createServer } from 'node:https';", expected: /imports node:https: tls may import only/ },
    { name: 'kube importing fastify', file: 'kube/x.ts', text: "import fastify from 'fastify';", expected: /fastify, which kube must not use/ },
    { name: 'server importing client-node', file: 'server/x.ts', text: "import { KubeConfig } from '@kubernetes/client-node';", expected: /client-node, which server must not use/ },
    { name: 'a room with no place', file: 'gadgets/x.ts', text: '', expected: /room gadgets has no place/ },
  ];
  for (const { name, file, text, expected } of breaks) {
    it(`refuses ${name}`, () => {
      assert.match(layeringViolations(file, text).join('\n'), expected);
    });
  }

  it('accepts what the rules allow: downward imports, property names and declarations that look like globals', () => {
    const text = [
      "import { CertificateError } from '../errors.js';",
      "import type { TemplateSet } from '../injection/index.js';",
      "import yaml from 'js-yaml';",
      'const o = { process: 1, console: 2 };',
      'export const f = (x: { process: number }): number => x.process + o.console + new Date(0).getTime();',
    ].join('\n');
    assert.deepEqual(layeringViolations('injection/x.ts', text.replace("'../injection/index.js'", "'./index.js'")), []);
    assert.deepEqual(layeringViolations('state/x.ts', text.replace("import yaml from 'js-yaml';", '')), []);
  });
});
