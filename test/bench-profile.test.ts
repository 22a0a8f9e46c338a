import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';
import { sourceMapLocator } from '../bench/profile-sources.js';
import { classifyFrame, packageOf, stageOf, summariseProfile, type CpuProfile, type CpuProfileNode, type Locate } from '../bench/cpu-profile.js';

/** Bundle URLs stand for their original sources as `file:///bundle/<source>`; line 9 → 10 (1-based). */
const locate: Locate = (url, line) => (url.startsWith('file:///bundle/') ? { source: url.slice('file:///bundle/'.length), line: line + 1 } : undefined);
const frame = (functionName: string, url = ''): CpuProfileNode['callFrame'] => ({ functionName, url, lineNumber: 9, columnNumber: 0 });
const bundled = (functionName: string, source: string): CpuProfileNode['callFrame'] => frame(functionName, `file:///bundle/${source}`);

/**
 * A profile of one server: (root) → handle-request (fastify) → our route → reviewAdmission → PatchMemo answer →
 * injectDecided → a helper in json.ts (leaf); the route → decideInjection → own (json.ts, leaf);
 * fastify's content-type parser → our parser closure (leaf); reply.js → writev (native leaf); GC; idle; prom-client under recordAdmission.
 */
function sampleProfile(): CpuProfile {
  const calls: [number, CpuProfileNode['callFrame'], number[]][] = [
    [1, frame('(root)'), [2, 20, 30, 40]],
    [2, bundled('handleRequest', 'node_modules/fastify/lib/handle-request.js'), [3, 10]],
    [3, bundled('', 'src/server/build-app.ts'), [4, 12, 14]],
    [4, bundled('reviewAdmission', 'src/admission/review-admission.ts'), [5, 8]],
    [5, bundled('answer2', 'src/admission/patch-memo.ts'), [6]],
    [6, bundled('injectDecided', 'src/injection/admit-pod.ts'), [7]],
    [7, bundled('own', 'src/injection/basics/json.ts'), []],
    [8, bundled('decideInjection', 'src/injection/decision/decide-injection.ts'), [9]],
    [9, bundled('own', 'src/injection/basics/json.ts'), []],
    [10, bundled('rawBody', 'node_modules/fastify/lib/content-type-parser.js'), [11]],
    [11, bundled('', 'src/server/build-app.ts'), []],
    [12, bundled('send', 'node_modules/fastify/lib/reply.js'), [13]],
    [13, frame('writev'), []],
    [14, bundled('recordAdmission', 'src/server/metrics.ts'), [15]],
    [15, bundled('observe', 'node_modules/prom-client/lib/histogram.js'), []],
    [20, frame('(garbage collector)'), []],
    [30, frame('(idle)'), []],
    [40, frame('onStreamRead', 'node:internal/stream_base_commons'), []],
  ];
  const nodes = calls.map(([id, callFrame, children]) => ({ id, callFrame, children }));
  // Leaf ids sampled; each sample weighs the median interval (10 µs), a wait for a core (the 500) blaming nothing.
  const samples = [7, 7, 9, 11, 13, 13, 15, 20, 30, 30, 40];
  const timeDeltas = [0, 10, 10, 10, 500, 10, 10, 10, 10, 9, 11];
  return { nodes, startTime: 0, endTime: 110, samples, timeDeltas };
}

describe('bench: the CPU profile summary', () => {
  it('names frames: our code by function and source line, node_modules by package, Node by module, V8 apart', () => {
    assert.deepEqual(classifyFrame(bundled('answer2', 'src/admission/patch-memo.ts'), locate), { key: 'answer (src/admission/patch-memo.ts:10)', kind: 'ours', name: 'answer', source: 'src/admission/patch-memo.ts' });
    assert.equal(classifyFrame(bundled('', 'src/server/build-app.ts'), locate).key, '(anonymous) (src/server/build-app.ts:10)');
    assert.equal(classifyFrame(bundled('observe', 'node_modules/prom-client/lib/histogram.js'), locate).key, 'prom-client');
    assert.equal(classifyFrame(frame('x', 'node:internal/tls/wrap'), locate).kind, 'node');
    assert.equal(classifyFrame(frame('(garbage collector)'), locate).kind, 'special');
    assert.equal(classifyFrame(frame('parse'), locate).key, '(native) parse');
    // A script without a map keeps its own path.
    assert.equal(classifyFrame(frame('f', 'file:///elsewhere/x.js'), locate).key, 'f (file:///elsewhere/x.js)');
    assert.equal(packageOf('node_modules/@kubernetes/client-node/dist/watch.js'), '@kubernetes/client-node');
    assert.equal(packageOf('../node_modules/a/node_modules/b/index.js'), 'b');
    assert.equal(packageOf('src/main.ts'), undefined);
  });

  it('gives each sample the stage of the innermost frame that has one', () => {
    const stack = (...frames: CpuProfileNode['callFrame'][]) => frames.map((callFrame) => classifyFrame(callFrame, locate));
    const route = bundled('', 'src/server/build-app.ts');
    const json = bundled('own', 'src/injection/basics/json.ts');
    // The patch computed inside the memo's answer is the patch's; the memo's own work is the memo's.
    assert.equal(stageOf(stack(json, bundled('injectDecided', 'src/injection/admit-pod.ts'), bundled('answer', 'src/admission/patch-memo.ts'), route)), 'patch');
    assert.equal(stageOf(stack(json, bundled('podShape', 'src/admission/patch-memo.ts'), route)), 'memo');
    assert.equal(stageOf(stack(json, bundled('decideInjection', 'src/injection/decision/decide-injection.ts'), route)), 'decision');
    assert.equal(stageOf(stack(route, bundled('rawBody', 'node_modules/fastify/lib/content-type-parser.js'))), 'parse');
    assert.equal(stageOf(stack(frame('write'), bundled('send', 'node_modules/fastify/lib/reply.js'), route)), 'answer');
    assert.equal(stageOf(stack(bundled('info', 'node_modules/pino/pino.js'), bundled('logAdmission', 'src/server/build-app.ts'))), 'logging');
    // A package's function named like one of ours is not ours.
    assert.equal(stageOf(stack(bundled('allowed', 'node_modules/x/index.js'))), 'HTTP, TLS, Fastify (the floor has these too)');
    assert.equal(stageOf(stack(json, route)), 'our handler, other');
    // The handler runs inside the parser's callback: its own work is not the parse's, nor is Fastify's call of it.
    const parser = bundled('rawBody', 'node_modules/fastify/lib/content-type-parser.js');
    const handlerCall = bundled('handler', 'node_modules/fastify/lib/handle-request.js');
    assert.equal(stageOf(stack(bundled('reviewAdmission', 'src/admission/review-admission.ts'), route, handlerCall, parser)), 'our handler, other');
    assert.equal(stageOf(stack(bundled('x', 'node_modules/fastify/lib/route.js'), handlerCall, parser)), 'HTTP, TLS, Fastify (the floor has these too)');
    assert.equal(stageOf(stack(bundled('validate', 'node_modules/fastify/lib/validation.js'), handlerCall, parser)), 'envelope checks');
    assert.equal(stageOf(stack(frame('(garbage collector)'), frame('(root)'))), 'GC');
    assert.equal(stageOf(stack(frame('(idle)'), frame('(root)'))), 'idle');
    assert.equal(stageOf(stack(frame('(program)'), frame('(root)'))), 'V8, other');
  });

  it('sums self time per function of ours, per group and per stage, idle apart', () => {
    const summary = summariseProfile(sampleProfile(), locate);
    assert.equal(summary.samples, 11);
    assert.equal(summary.idleMicroseconds, 20);
    assert.equal(summary.busyMicroseconds, 90);
    assert.deepEqual(
      summary.ours.map(({ key, microseconds }) => [key, microseconds]),
      [
        ['own (src/injection/basics/json.ts:10)', 30],
        ['(anonymous) (src/server/build-app.ts:10)', 10],
      ],
    );
    const group = (key: string): number | undefined => summary.groups.find((entry) => entry.key === key)?.microseconds;
    assert.equal(group('our code (src/)'), 40);
    assert.equal(group('(native) writev'), 20);
    assert.equal(group('prom-client'), 10);
    assert.equal(group('(garbage collector)'), 10);
    assert.equal(group('node:internal/stream_base_commons'), 10);
    const stage = (key: string): number | undefined => summary.stages.find((entry) => entry.key === key)?.microseconds;
    assert.equal(stage('patch'), 20);
    assert.equal(stage('decision'), 10);
    assert.equal(stage('parse'), 10);
    assert.equal(stage('answer'), 20);
    assert.equal(stage('metrics'), 10);
    assert.equal(stage('GC'), 10);
    assert.equal(stage('HTTP, TLS, Fastify (the floor has these too)'), 10);
    assert.equal(stage('memo'), 0);
    assert.ok(Math.abs((summary.stages.find((entry) => entry.key === 'patch')?.share ?? 0) - 20 / 90) < 1e-9);
    assert.equal(summary.stages.reduce((sum, entry) => sum + entry.microseconds, 0), summary.busyMicroseconds);
  });
});

describe('bench: where a profiled frame comes from', () => {
  it('maps a bundled function back to its source through the linked map, relative to the repository', async () => {
    const root = mkdtempSync(join(tmpdir(), 'bench-profile-'));
    try {
      mkdirSync(join(root, 'src'));
      writeFileSync(join(root, 'src', 'greet.ts'), 'export const unused = 1;\nexport function greet(name: string): string {\n  return `hello ${name}`;\n}\nconsole.log(greet(process.argv[2] ?? ""));\n');
      await build({ absWorkingDir: root, entryPoints: ['src/greet.ts'], outdir: join(root, 'dist'), bundle: true, minifyWhitespace: true, sourcemap: 'linked', format: 'esm', logLevel: 'silent' });
      const bundle = join(root, 'dist', 'greet.js');
      const lines = readFileSync(bundle, 'utf8').split('\n');
      const line = lines.findIndex((text) => text.includes('function greet('));
      assert.ok(line >= 0, 'the bundle holds greet');
      const locate = sourceMapLocator(root);
      assert.deepEqual(locate(pathToFileURL(bundle).href, line, lines[line]?.indexOf('function greet(') ?? -1), { source: 'src/greet.ts', line: 2 });
      // Without a map: the script itself; not a file: unknown.
      writeFileSync(join(root, 'plain.js'), 'function f() {}\n');
      assert.deepEqual(locate(pathToFileURL(join(root, 'plain.js')).href, 0, 0), { source: 'plain.js', line: 1 });
      assert.equal(locate('node:internal/tls/wrap', 0, 0), undefined);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});
