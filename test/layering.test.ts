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
  cli: 6,
  commands: 5,
  server: 4,
  kube: 4,
  node: 4,
  admission: 3,
  state: 3,
  policy: 3,
  fleet: 3,
  events: 3,
  injection: 2,
  tls: 2,
  errors: 1,
};

// The rooms inside a room, ranked as above among themselves: the room's own
// files (its `index.ts` door among them) stand above its inner rooms. A file
// outside an inner room imports it only through the inner room's index.ts.
const INNER_RANK: Readonly<Record<string, number>> = {
  'injection/basics': 1,
  'injection/template': 2,
  'injection/decision': 3,
  'injection/traffic': 3,
  'injection/merge': 4,
  injection: 5,
  'kube/api': 1,
  'kube/watches': 2,
  'kube/certificates': 2,
  kube: 3,
  'node/cni': 1,
  node: 2,
};
const INNER_ROOMS = Object.keys(INNER_RANK).filter((room) => room.includes('/'));

// Packages and Node modules a room may import. Rooms not listed may import any.
const PURE = ['node:crypto', 'js-yaml', 'fast-json-patch'];
const ALLOWED_PACKAGES: Readonly<Record<string, readonly string[]>> = {
  injection: PURE,
  policy: PURE,
  fleet: PURE,
  events: PURE,
  'node/cni': [],
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
  // The node's own I/O (the shim's socket, the plugin's files, the rules, the check): the API is reached through kube/.
  node: ['@kubernetes/client-node', 'fastify'],
};
// The pure rooms touch no process, clock, timer, console or randomness.
const PURE_ROOMS = new Set(['injection', 'policy', 'fleet', 'events', 'node/cni']);
const AMBIENT = new Set(['process', 'setTimeout', 'setInterval', 'setImmediate', 'fetch', 'performance', 'console', 'require', 'globalThis']);

const srcDir = join(dirname(fileURLToPath(import.meta.url)), '..', 'src');
const designPath = join(srcDir, '..', 'docs', 'design.md');

/** A folder of src/, or a top-level file by its name without extension (`cli`, `errors`). */
function outerRoomOf(file: string): string {
  return (file.split('/')[0] ?? file).replace(/\.[jt]s$/, '');
}

/** The innermost room holding FILE: an inner room (`injection/template`) or a room of src/. */
function roomOf(file: string): string {
  return INNER_ROOMS.find((room) => file.startsWith(`${room}/`)) ?? outerRoomOf(file);
}

/** What a room may import and must not do: an inner room's rules are its own, else its outer room's. */
function rulesOf<T>(table: Readonly<Record<string, T>>, room: string): T | undefined {
  return table[room] ?? table[outerRoomOf(room)];
}

/** Why FILE may not import TARGET (both relative to src/), or undefined. */
function importViolation(file: string, target: string, specifier: string): string | undefined {
  const room = roomOf(file);
  const targetRoom = roomOf(target);
  if (target.startsWith('..')) return `src/${file} imports ${specifier}, outside src/`;
  if (targetRoom === room) return undefined;
  const outer = outerRoomOf(file);
  const targetOuter = outerRoomOf(target);
  const below = outer === targetOuter ? (INNER_RANK[targetRoom] ?? Infinity) < (INNER_RANK[room] ?? -Infinity) : (RANK[targetOuter] ?? Infinity) < (RANK[outer] ?? -Infinity);
  if (!below) return `src/${file} imports src/${target}: ${room} may import only rooms below it, not ${targetRoom}`;
  if (INNER_ROOMS.includes(targetRoom) && target !== `${targetRoom}/index.ts` && !room.startsWith(`${targetRoom}/`)) {
    return `src/${file} imports src/${target}: outside ${targetRoom}/, import its door, ${targetRoom}/index.ts`;
  }
  return undefined;
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
  if (RANK[outerRoomOf(file)] === undefined) return [`src/${file}: room ${room} has no place in the layering; add it to RANK in test/layering.test.ts and to docs/design.md`];
  const violations: string[] = [];
  for (const specifier of importsOf(file, text)) {
    if (specifier.startsWith('.')) {
      const target = posix.normalize(posix.join(posix.dirname(file), specifier)).replace(/\.js$/, '.ts');
      const violation = importViolation(file, target, specifier);
      if (violation !== undefined) violations.push(violation);
      continue;
    }
    const allowed = rulesOf(ALLOWED_PACKAGES, room);
    if (allowed !== undefined && !allowed.includes(specifier)) {
      violations.push(`src/${file} imports ${specifier}: ${room} may import only ${allowed.join(', ') || 'nothing outside src/'}`);
    }
    if (rulesOf(FORBIDDEN_PACKAGES, room)?.includes(specifier) === true) {
      violations.push(`src/${file} imports ${specifier}, which ${room} must not use`);
    }
  }
  if (PURE_ROOMS.has(room) || PURE_ROOMS.has(outerRoomOf(file))) {
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

/** A picture of design.md: the rooms it draws (by the path its label names) and its arrows, `from -> to`. */
interface RoomPicture {
  readonly rooms: ReadonlySet<string>;
  readonly arrows: ReadonlySet<string>;
}

/** The `flowchart` pictures of design.md's rooms section; a node's label is a room's path (`injection/template/`, `main.ts`). */
function roomPictures(markdown: string): RoomPicture[] {
  const section = markdown.slice(markdown.indexOf('## 2. '), markdown.indexOf('\n## 3. '));
  return [...section.matchAll(/```mermaid\n(flowchart[^\n]*\n[\s\S]*?)```/g)].map(([, block = '']) => {
    const labels = new Map<string, string>();
    const arrows = new Set<string>();
    const node = (token: string): string => {
      const match = /^\s*(\w+)(?:\[([^\]]+)\])?\s*$/.exec(token);
      if (match === null) throw new Error(`design.md: cannot read the picture's node ${JSON.stringify(token)}`);
      const [, id = '', label] = match;
      if (label !== undefined) labels.set(id, label.replace(/\/$|\.ts$/, ''));
      return id;
    };
    for (const line of block.split('\n').slice(1)) {
      if (line.trim() === '' || line.trim().startsWith('%%')) continue;
      const ids = line.split('-->').map(node);
      for (let index = 1; index < ids.length; index += 1) arrows.add(`${ids[index - 1]} -> ${ids[index]}`);
    }
    const room = (id: string): string => labels.get(id) ?? id;
    return { rooms: new Set([...labels.values()]), arrows: new Set([...arrows].map((arrow) => arrow.split(' -> ').map(room).join(' -> '))) };
  });
}

/** The arrows between the rooms a picture draws that the code has: a file's room is the longest drawn path holding it. */
function arrowsInCode(graph: ReadonlyMap<string, readonly string[]>, rooms: ReadonlySet<string>): Set<string> {
  const drawnRoomOf = (file: string): string | undefined => {
    const holders = [...rooms].filter((room) => file === `${room}.ts` || file.startsWith(`${room}/`));
    return holders.sort((a, b) => b.length - a.length)[0];
  };
  const arrows = new Set<string>();
  for (const [file, targets] of graph) {
    const from = drawnRoomOf(file);
    if (from === undefined) continue;
    for (const target of targets) {
      const to = drawnRoomOf(target);
      if (to !== undefined && to !== from) arrows.add(`${from} -> ${to}`);
    }
  }
  return arrows;
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

  it("design.md's pictures of the rooms draw every arrow the imports have, and none they lack", () => {
    const graph = importGraph(new Map(sourceFiles(srcDir).map((file) => [file, readFileSync(join(srcDir, file), 'utf8')])));
    const pictures = roomPictures(readFileSync(designPath, 'utf8'));
    assert.ok(pictures.length >= 2, 'expected the rooms of src/ and the inner rooms drawn in design.md section 2');
    for (const picture of pictures) {
      const inCode = arrowsInCode(graph, picture.rooms);
      const drawn = [...picture.rooms].sort().join(', ');
      assert.deepEqual([...picture.arrows].filter((arrow) => !inCode.has(arrow)).sort(), [], `design.md draws arrows the code lacks (picture of ${drawn})`);
      assert.deepEqual([...inCode].filter((arrow) => !picture.arrows.has(arrow)).sort(), [], `the code has arrows design.md does not draw (picture of ${drawn})`);
    }
  });

  it('reads a picture and holds it against the imports, both ways', () => {
    const picture = roomPictures(['## 2. Rooms', '```mermaid', 'flowchart TD', '  a[commands/] --> b[kube/]', '  b --> c[injection/]', '```', '## 3. Next'].join('\n'))[0];
    assert.ok(picture !== undefined);
    assert.deepEqual([...picture.rooms].sort(), ['commands', 'injection', 'kube']);
    const graph = new Map([
      ['commands/serve.ts', ['kube/api/x.ts', 'injection/index.ts']],
      ['kube/api/x.ts', ['kube/y.ts']],
      ['kube/y.ts', []],
      ['injection/index.ts', []],
    ]);
    assert.deepEqual([...arrowsInCode(graph, picture.rooms)].sort(), ['commands -> injection', 'commands -> kube']);
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
    { name: 'an inner room importing one above it', file: 'injection/template/x.ts', text: "import { a } from '../decision/index.js';", expected: /injection\/template may import only rooms below it, not injection\/decision/ },
    { name: 'two inner rooms of one rank', file: 'injection/traffic/x.ts', text: "import { a } from '../decision/index.js';", expected: /not injection\/decision/ },
    { name: "an inner room's file reached past its door", file: 'injection/merge/x.ts', text: "import { a } from '../basics/json.js';", expected: /import its door, injection\/basics\/index\.ts/ },
    { name: "an inner room's file reached from another room", file: 'commands/x.ts', text: "import { a } from '../kube/api/backoff.js';", expected: /import its door, kube\/api\/index\.ts/ },
    { name: 'the pure CNI decisions reading files', file: 'node/cni/x.ts', text: "import { readFile } from 'node:fs/promises';", expected: /node\/cni may import only nothing outside src/ },
    { name: 'the node agent reaching the API itself', file: 'node/x.ts', text: "import { KubeConfig } from '@kubernetes/client-node';", expected: /client-node, which node must not use/ },
    { name: 'the node agent importing kube', file: 'node/x.ts', text: "import { a } from '../kube/index.js';", expected: /node may import only rooms below it, not kube/ },
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
