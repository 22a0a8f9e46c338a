import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import ts from 'typescript';
import { httpsRequest } from './https-client.js';
import type { LoadResult, LoadSpec } from './load.js';
import { OURS_NODE_FLAGS, SETTINGS } from './options.js';
import { killAllChildren, ROOT, runNode, startServer, type ServerProcess } from './processes.js';
import { imageEntrypoint, imageMallocEnvironment } from '../test/helpers/dockerfile.js';

/**
 * The run's work directory and deadline, and the processes every part
 * starts: our server, the floor, the load worker.
 */

export const work = mkdtempSync(join(tmpdir(), 'envoy-injector-bench-'));
export const certsDir = join(work, 'certs');
const deadline = setTimeout(() => {
  process.stderr.write(`bench: still running after ${SETTINGS.deadlineMs / 60_000} min, giving up\n`);
  cleanUp();
  process.exit(1);
}, SETTINGS.deadlineMs);
deadline.unref();
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    cleanUp();
    process.exit(130);
  });
}

export function cleanUp(): void {
  killAllChildren();
  rmSync(work, { recursive: true, force: true });
}

export function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Ours runs with the image's node flags (the Dockerfile's ENTRYPOINT, as `npm start`); the floor with Node's defaults. */
export const IMAGE_NODE_FLAGS = imageEntrypoint(readFileSync(join(ROOT, 'Dockerfile'), 'utf8')).nodeFlags;
/** And with the image's malloc settings (its `ENV MALLOC_*`, as `npm start`): they decide how much of what was freed stays resident. */
export const IMAGE_MALLOC_ENV = imageMallocEnvironment(readFileSync(join(ROOT, 'Dockerfile'), 'utf8'));
const mallocEnv: Readonly<Record<string, string>> = Object.fromEntries(IMAGE_MALLOC_ENV.map((word) => [word.slice(0, word.indexOf('=')), word.slice(word.indexOf('=') + 1)]));

/** Our compiled server with production settings (plus ARGS); it makes dev certificates in `certsDir` on first start. */
export function startOurs(args: readonly string[] = [], nodeFlags: readonly string[] = [], env: Readonly<Record<string, string>> = {}, launcher: readonly string[] = []): Promise<ServerProcess> {
  return startServer(
    [...IMAGE_NODE_FLAGS, ...OURS_NODE_FLAGS, ...nodeFlags, 'bin/envoy-injector.js', 'serve', '--host', '127.0.0.1', '--port', '0', '--log-level', 'info', '--certs-dir', certsDir, ...args],
    'envoy-injector serving https',
    // In cluster mode, client-node's import alone takes seconds on a loaded machine; under valgrind, everything.
    launcher.length > 0 ? 240_000 : 60_000,
    { ...mallocEnv, ...env },
    launcher,
  );
}

/**
 * The floor server and the load worker run as plain JavaScript, as our
 * compiled server does: no tsx loader in their process (under tsx the floor
 * measured ~40% slower and 40 MiB larger). They are compiled next to
 * node_modules so that `fastify` and `autocannon` resolve to the very
 * packages our server and package.json use.
 */
export function compileBenchScript(name: string): string {
  const dir = join(ROOT, 'node_modules', '.cache', 'envoy-injector-bench');
  mkdirSync(dir, { recursive: true });
  const source = readFileSync(join(ROOT, 'bench', `${name}.ts`), 'utf8');
  const { outputText } = ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2022, verbatimModuleSyntax: true },
  });
  const file = join(dir, `${name}.mjs`);
  writeFileSync(file, outputText);
  return file;
}
export const FLOOR_SCRIPT = compileBenchScript('floor-server');
const LOAD_SCRIPT = compileBenchScript('load');

export function startFloor(responseFile: string, launcher: readonly string[] = []): Promise<ServerProcess> {
  return startServer([FLOOR_SCRIPT, join(certsDir, 'tls.crt'), join(certsDir, 'tls.key'), responseFile], 'floor serving https', launcher.length > 0 ? 240_000 : 15_000, {}, launcher);
}

export function caPem(): string {
  return readFileSync(join(certsDir, 'ca.crt'), 'utf8');
}

export function writeBodies(name: string, bodies: readonly string[]): string {
  const file = join(work, `${name}.bodies`);
  writeFileSync(file, `${bodies.join('\n')}\n`);
  return file;
}

let loadCount = 0;
export async function load(server: ServerProcess, bodiesFile: string, connections: number, run: { durationSeconds: number } | { amount: number }): Promise<LoadResult> {
  const spec: LoadSpec = { url: `https://127.0.0.1:${server.port}/mutate`, caFile: join(certsDir, 'ca.crt'), bodiesFile, connections, ...run };
  const specFile = join(work, `load-${loadCount++}.json`);
  writeFileSync(specFile, JSON.stringify(spec));
  const budgetMs = ('durationSeconds' in run ? run.durationSeconds * 1000 : 120_000) + 60_000;
  const output = await runNode([LOAD_SCRIPT, specFile], budgetMs);
  return JSON.parse(output.trim().split('\n').at(-1) ?? '{}') as LoadResult;
}

const GC_SCRIPT = compileBenchScript('gc-on-signal');
export const GC_FLAGS = ['--expose-gc', '--import', GC_SCRIPT];

/** Spawns our server with ARGS and resolves once `/readyz` answers 200: the process and the times to listening and to ready. */
export async function startOursReady(args: readonly string[], nodeFlags: readonly string[] = [], env: Readonly<Record<string, string>> = {}): Promise<{ server: ServerProcess; listeningMs: number; readyMs: number }> {
  const started = performance.now();
  const server = await startOurs(args, nodeFlags, env);
  const listeningMs = performance.now() - started;
  try {
    for (;;) {
      const answer = await httpsRequest(`https://127.0.0.1:${server.port}/readyz`, { ca: caPem(), timeoutMs: 2_000 }).catch(() => undefined);
      if (answer?.status === 200) break;
      if (performance.now() - started > 60_000) throw new Error(`/readyz: not 200 after 60 s\n${server.stderr.join('\n')}`);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  } catch (error) {
    await server.stop();
    throw error;
  }
  return { server, listeningMs, readyMs: performance.now() - started };
}

