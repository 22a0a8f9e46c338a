/**
 * `npm run bench`: our compiled server against a floor server, in one run, on
 * loopback, each a separate process, driven by a load generator in a third
 * process (bench/load.ts). Prints a table and PASS/FAIL per target, writes
 * bench/results/latest.json and a dated copy. Never fails on timing: the exit
 * code is non-zero only when the harness itself breaks. See bench/README.md.
 *
 *   npm run bench                        # the full run, a few minutes
 *   node --import tsx bench/run.ts --quick   # a short smoke run (after npm run build)
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import ts from 'typescript';
import { httpsRequest } from './https-client.js';
import type { LoadResult, LoadSpec } from './load.js';
import {
  MemorySampler,
  ROOT,
  killAllChildren,
  readCpuSeconds,
  readMachineBusySeconds,
  readMemory,
  runNode,
  startServer,
  type ServerProcess,
} from './processes.js';
import { CLUSTER_NAMESPACE, startBenchCluster } from './cluster.js';
import { burstReviews, largeReview, seedReview, skippedReview } from './reviews.js';
import { imageEntrypoint } from '../test/helpers/dockerfile.js';

const MIB = 1024 * 1024;

const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    /** Comma-separated parts to run: scenario names (seed, skip, large, burst), memory, coldstart, cluster, size. */
    only: { type: 'string' },
    /** Extra node flags for our server only, e.g. "--max-semi-space-size=4", to try a fix; recorded in the results. */
    'ours-node-flags': { type: 'string', default: '' },
  },
});
const QUICK = flags.quick;
const ONLY = flags.only?.split(',').map((name) => name.trim());
const OURS_NODE_FLAGS = flags['ours-node-flags'].split(' ').filter((flag) => flag !== '');
const selected = (part: string): boolean => ONLY === undefined || ONLY.includes(part);

/** Seconds per timed round, per warm-up, and requests for the memory check; --quick shrinks all. */
const SETTINGS = {
  roundSeconds: QUICK ? 2 : 3,
  warmupSeconds: QUICK ? 1 : 2,
  /** Rounds per server, in the order ours, floor, floor, ours, ours, … (ABBA) so that drift on the machine cancels. */
  rounds: QUICK ? 2 : 4,
  burstSize: 2000,
  memoryRequests: QUICK ? [2_000, 20_000] : [20_000, 200_000],
  coldStarts: QUICK ? 3 : 7,
  /** Cluster mode: seconds from ready to the at-rest reading. */
  restSeconds: QUICK ? 5 : 60,
  /** The whole run is killed past this (a hung child must not hang CI or a terminal). */
  deadlineMs: 15 * 60_000,
} as const;

interface Scenario {
  readonly name: string;
  readonly description: string;
  readonly connections: number;
  /** Timed (seconds per round) or a fixed number of requests per round. */
  readonly amount?: number;
  readonly expectPatch: boolean;
  readonly bodies: readonly string[];
  /** The body the warm-up sends (the scenario's own unless set). */
  readonly warmupBodies?: readonly string[];
}

const compact = (value: unknown): string => JSON.stringify(value);
const seedBody = compact(seedReview());
const ALL_SCENARIOS: readonly Scenario[] = [
  { name: 'seed', description: 'seed Pod, injected', connections: 50, expectPatch: true, bodies: [seedBody] },
  { name: 'skip', description: 'seed Pod annotated inject "false", skipped', connections: 50, expectPatch: false, bodies: [compact(skippedReview())] },
  { name: 'large', description: '~1 MiB Pod (40 containers, 2,000 env vars), injected', connections: 4, expectPatch: true, bodies: [compact(largeReview())] },
  {
    name: 'burst',
    description: `${SETTINGS.burstSize} reviews of a Deployment scaled 0 → ${SETTINGS.burstSize} (distinct uids, generateName), fresh connections`,
    connections: 50,
    amount: SETTINGS.burstSize,
    expectPatch: true,
    bodies: burstReviews(SETTINGS.burstSize).map(compact),
    warmupBodies: [seedBody],
  },
];

const SCENARIOS = ALL_SCENARIOS.filter((scenario) => selected(scenario.name));
const PARTS = [...ALL_SCENARIOS.map((scenario) => scenario.name), 'memory', 'coldstart', 'cluster', 'size'];
const unknownParts = (ONLY ?? []).filter((part) => !PARTS.includes(part));
if (unknownParts.length > 0) throw new Error(`--only: unknown ${unknownParts.join(', ')} (known: ${PARTS.join(', ')})`);

/** One load run and the CPU time the server spent on it. */
interface Round extends LoadResult {
  readonly serverCpuSeconds: number;
  readonly cpuUsPerRequest: number;
  /**
   * Share of the machine's CPU (all cores, over the round) used by anything
   * but the server, the load worker and this harness: other work, which makes
   * req/s and latency noisy.
   */
  readonly otherCpuShare: number;
}

interface ServerFigures {
  readonly requestsPerSecond: number;
  /** Server CPU (user + system) per response: robust to other work on the machine. */
  readonly cpuUsPerRequest: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** non-2xx + socket errors + timeouts, over every run of this server in the scenario (warm-up included). */
  readonly errors: number;
  readonly rounds: readonly Round[];
}

interface ScenarioResult {
  readonly name: string;
  readonly description: string;
  readonly connections: number;
  readonly mode: string;
  readonly requestBytes: number;
  readonly responseBytes: number;
  readonly ours: ServerFigures;
  readonly floor: ServerFigures;
  /** VmHWM of our server process over the scenario (a fresh process per scenario). */
  readonly oursPeakRssBytes: number;
  readonly floorPeakRssBytes: number;
  readonly ratios: { readonly throughput: number; readonly p99: number; readonly cpuPerRequest: number };
  /** Mean and highest share of the machine's CPU used by other work during the rounds. */
  readonly otherCpu: { readonly mean: number; readonly max: number };
}

const work = mkdtempSync(join(tmpdir(), 'envoy-injector-bench-'));
const certsDir = join(work, 'certs');
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

function cleanUp(): void {
  killAllChildren();
  rmSync(work, { recursive: true, force: true });
}

function log(line: string): void {
  process.stderr.write(`${line}\n`);
}

/** Our compiled server with production settings (plus ARGS); it makes dev certificates in `certsDir` on first start. */
/** Ours runs with the image's node flags (the Dockerfile's ENTRYPOINT, as `npm start`); the floor with Node's defaults. */
const IMAGE_NODE_FLAGS = imageEntrypoint(readFileSync(join(ROOT, 'Dockerfile'), 'utf8')).nodeFlags;

function startOurs(args: readonly string[] = [], nodeFlags: readonly string[] = []): Promise<ServerProcess> {
  return startServer(
    [...IMAGE_NODE_FLAGS, ...OURS_NODE_FLAGS, ...nodeFlags, 'bin/envoy-injector.js', 'serve', '--host', '127.0.0.1', '--port', '0', '--log-level', 'info', '--certs-dir', certsDir, ...args],
    'envoy-injector serving https',
    // In cluster mode, client-node's import alone takes seconds on a loaded machine.
    60_000,
  );
}

/**
 * The floor server and the load worker run as plain JavaScript, as our
 * compiled server does: no tsx loader in their process (under tsx the floor
 * measured ~40% slower and 40 MiB larger). They are compiled next to
 * node_modules so that `fastify` and `autocannon` resolve to the very
 * packages our server and package.json use.
 */
function compileBenchScript(name: string): string {
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
const FLOOR_SCRIPT = compileBenchScript('floor-server');
const LOAD_SCRIPT = compileBenchScript('load');

function startFloor(responseFile: string): Promise<ServerProcess> {
  return startServer([FLOOR_SCRIPT, join(certsDir, 'tls.crt'), join(certsDir, 'tls.key'), responseFile], 'floor serving https');
}

function caPem(): string {
  return readFileSync(join(certsDir, 'ca.crt'), 'utf8');
}

function writeBodies(name: string, bodies: readonly string[]): string {
  const file = join(work, `${name}.bodies`);
  writeFileSync(file, `${bodies.join('\n')}\n`);
  return file;
}

let loadCount = 0;
async function load(server: ServerProcess, bodiesFile: string, connections: number, run: { durationSeconds: number } | { amount: number }): Promise<LoadResult> {
  const spec: LoadSpec = { url: `https://127.0.0.1:${server.port}/mutate`, caFile: join(certsDir, 'ca.crt'), bodiesFile, connections, ...run };
  const specFile = join(work, `load-${loadCount++}.json`);
  writeFileSync(specFile, JSON.stringify(spec));
  const budgetMs = ('durationSeconds' in run ? run.durationSeconds * 1000 : 120_000) + 60_000;
  const output = await runNode([LOAD_SCRIPT, specFile], budgetMs);
  return JSON.parse(output.trim().split('\n').at(-1) ?? '{}') as LoadResult;
}

function errorsOf(result: LoadResult): number {
  return result.non2xx + result.socketErrors + result.timeouts;
}

function mean(values: readonly number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? NaN) : ((sorted[middle - 1] ?? NaN) + (sorted[middle] ?? NaN)) / 2;
}

function figures(rounds: readonly Round[], warmups: readonly LoadResult[]): ServerFigures {
  return {
    requestsPerSecond: mean(rounds.map((round) => round.requestsPerSecond)),
    cpuUsPerRequest: mean(rounds.map((round) => round.cpuUsPerRequest)),
    p50Ms: mean(rounds.map((round) => round.latencyMs.p50)),
    p99Ms: mean(rounds.map((round) => round.latencyMs.p99)),
    maxMs: Math.max(...rounds.map((round) => round.latencyMs.max)),
    errors: [...rounds, ...warmups].reduce((sum, result) => sum + errorsOf(result), 0),
    rounds,
  };
}

/** Asks our server once (CA verified) for its answer to each scenario's first body; that is what the floor will send. */
async function precomputeResponses(): Promise<Map<string, string>> {
  const ours = await startOurs();
  try {
    const files = new Map<string, string>();
    for (const scenario of SCENARIOS) {
      const body = scenario.bodies[0] ?? '';
      const answer = await httpsRequest(`https://127.0.0.1:${ours.port}/mutate`, { ca: caPem(), method: 'POST', body: Buffer.from(body) });
      if (answer.status !== 200) throw new Error(`${scenario.name}: our server answered ${answer.status}: ${answer.body.toString().slice(0, 300)}`);
      const review = JSON.parse(answer.body.toString()) as { response?: { allowed?: boolean; patch?: string } };
      if (review.response?.allowed !== true || (review.response.patch !== undefined) !== scenario.expectPatch) {
        throw new Error(`${scenario.name}: expected ${scenario.expectPatch ? 'a patch' : 'no patch'}, got ${answer.body.toString().slice(0, 300)}`);
      }
      const file = join(work, `${scenario.name}.response.json`);
      writeFileSync(file, answer.body);
      files.set(scenario.name, file);
    }
    return files;
  } finally {
    await ours.stop();
  }
}

async function runScenario(scenario: Scenario, responseFile: string): Promise<ScenarioResult> {
  const bodiesFile = writeBodies(scenario.name, scenario.bodies);
  const warmupFile = scenario.warmupBodies === undefined ? bodiesFile : writeBodies(`${scenario.name}-warmup`, scenario.warmupBodies);
  const ours = await startOurs();
  const floor = await startFloor(responseFile);
  const oursMemory = new MemorySampler(ours.pid);
  const floorMemory = new MemorySampler(floor.pid);
  try {
    // The floor must put the very bytes of our answer on the wire.
    const expected = readFileSync(responseFile);
    const floorAnswer = await httpsRequest(`https://127.0.0.1:${floor.port}/mutate`, { ca: caPem(), method: 'POST', body: Buffer.from(scenario.bodies[0] ?? '') });
    if (floorAnswer.status !== 200 || !floorAnswer.body.equals(expected)) throw new Error(`${scenario.name}: the floor's answer differs from ours`);

    const servers = { ours, floor };
    const warmups: Record<'ours' | 'floor', LoadResult[]> = { ours: [], floor: [] };
    const rounds: Record<'ours' | 'floor', Round[]> = { ours: [], floor: [] };
    for (const side of ['ours', 'floor'] as const) {
      warmups[side].push(await load(servers[side], warmupFile, scenario.connections, { durationSeconds: SETTINGS.warmupSeconds }));
    }
    const order = Array.from({ length: SETTINGS.rounds }, (_, i) => (i % 2 === 0 ? (['ours', 'floor'] as const) : (['floor', 'ours'] as const))).flat();
    for (const side of order) {
      const run = scenario.amount === undefined ? { durationSeconds: SETTINGS.roundSeconds } : { amount: scenario.amount };
      const cpuBefore = readCpuSeconds(servers[side].pid);
      const machineBefore = readMachineBusySeconds();
      const harnessBefore = process.cpuUsage();
      const wallBefore = performance.now();
      const result = await load(servers[side], bodiesFile, scenario.connections, run);
      const wallSeconds = (performance.now() - wallBefore) / 1000;
      const harness = process.cpuUsage(harnessBefore);
      const machineBusy = readMachineBusySeconds() - machineBefore;
      const serverCpuSeconds = readCpuSeconds(servers[side].pid) - cpuBefore;
      const otherSeconds = machineBusy - serverCpuSeconds - result.cpuSeconds - (harness.user + harness.system) / 1e6;
      const otherCpuShare = Math.max(0, otherSeconds / (wallSeconds * cpus().length));
      rounds[side].push({ ...result, serverCpuSeconds, cpuUsPerRequest: (serverCpuSeconds * 1e6) / result.responses, otherCpuShare });
      log(
        `  ${scenario.name} ${side.padEnd(5)} ${result.requestsPerSecond.toFixed(0).padStart(6)} req/s  p99 ${result.latencyMs.p99.toFixed(2).padStart(7)} ms  ` +
          `CPU ${((serverCpuSeconds * 1e6) / result.responses).toFixed(0).padStart(5)} µs/req  errors ${errorsOf(result)}  other work ${(otherCpuShare * 100).toFixed(0)}%`,
      );
    }
    const oursFigures = figures(rounds.ours, warmups.ours);
    const floorFigures = figures(rounds.floor, warmups.floor);
    return {
      name: scenario.name,
      description: scenario.description,
      connections: scenario.connections,
      mode: scenario.amount === undefined ? `${SETTINGS.roundSeconds} s × ${SETTINGS.rounds} rounds` : `${scenario.amount} requests × ${SETTINGS.rounds} rounds`,
      requestBytes: Buffer.byteLength(scenario.bodies[0] ?? ''),
      responseBytes: expected.length,
      ours: oursFigures,
      floor: floorFigures,
      oursPeakRssBytes: oursMemory.stop().hwm,
      floorPeakRssBytes: floorMemory.stop().hwm,
      ratios: {
        throughput: oursFigures.requestsPerSecond / floorFigures.requestsPerSecond,
        p99: oursFigures.p99Ms / floorFigures.p99Ms,
        cpuPerRequest: oursFigures.cpuUsPerRequest / floorFigures.cpuUsPerRequest,
      },
      otherCpu: {
        mean: mean([...rounds.ours, ...rounds.floor].map((round) => round.otherCpuShare)),
        max: Math.max(...[...rounds.ours, ...rounds.floor].map((round) => round.otherCpuShare)),
      },
    };
  } finally {
    oursMemory.stop();
    floorMemory.stop();
    await Promise.all([ours.stop(), floor.stop()]);
  }
}

interface MemorySample {
  readonly requests: number;
  /** RSS as the load ends, garbage included. */
  readonly rssBytes: number;
  /** After full GCs (see atRest): what is still held. A leak grows these; uncollected garbage does not. */
  readonly afterGc: AtRest;
}

interface MemoryFlatness {
  readonly samples: readonly MemorySample[];
  readonly peakRssBytes: number;
  readonly errors: number;
  /** RSS after a full GC, after the last count over after the first. */
  readonly ratio: number;
}

/**
 * One server, the seed scenario, memory read after the first count of
 * requests and after the last, each time as the load ends and after full
 * GCs: V8 grows its heap lazily, so RSS with garbage in it drifts from run
 * to run; what survives a full GC is what the server holds.
 */
async function memoryFlatness(): Promise<MemoryFlatness> {
  const bodiesFile = writeBodies('memory', [seedBody]);
  const ours = await startOurs([], GC_FLAGS);
  const sampler = new MemorySampler(ours.pid);
  try {
    const samples: MemorySample[] = [];
    let errors = 0;
    let sent = 0;
    for (const target of SETTINGS.memoryRequests) {
      const result = await load(ours, bodiesFile, 50, { amount: target - sent });
      sent = target;
      errors += errorsOf(result);
      const rssBytes = readMemory(ours.pid).rss;
      const afterGc = await atRest(ours);
      samples.push({ requests: target, rssBytes, afterGc });
      log(`  memory: ${target} requests, RSS ${fmt.mib(rssBytes)} MiB, after a full GC ${fmt.mib(afterGc.rssBytes)} MiB (V8 heap ${fmt.mib(afterGc.heapUsedBytes)} MiB used)`);
    }
    return {
      samples,
      peakRssBytes: sampler.stop().hwm,
      errors,
      ratio: (samples.at(-1)?.afterGc.rssBytes ?? NaN) / (samples[0]?.afterGc.rssBytes ?? NaN),
    };
  } finally {
    sampler.stop();
    await ours.stop();
  }
}

function shippedText(shipped: ShippedSize): string {
  return `dist/bundle/ ${fmt.mib(shipped.bundleBytes)} MiB, of which source maps ${fmt.mib(shipped.sourceMapBytes)} MiB (the image has no node_modules)`;
}

function memoryFlatnessText(memory: MemoryFlatness): string {
  const after = memory.samples.map((sample) => `${fmt.mib(sample.afterGc.rssBytes)} MiB (V8 heap ${fmt.mib(sample.afterGc.heapUsedBytes)} MiB) after ${sample.requests.toLocaleString('en-US')}`);
  const loaded = memory.samples.map((sample) => `${fmt.mib(sample.rssBytes)} MiB after ${sample.requests.toLocaleString('en-US')}`);
  return `RSS after a full GC ${after.join(', ')} requests (${((memory.ratio - 1) * 100).toFixed(1)}%); as the load ended, garbage included, ${loaded.join(', ')}`;
}

interface ColdStart {
  readonly startsMs: readonly number[];
  readonly medianMs: number;
  /** Of the same starts: process start to the "serving" log line. */
  readonly listeningMedianMs: number;
  /** The floor (Fastify with TLS, nothing else): process start to listening, median of as many starts. */
  readonly floorMedianMs: number;
  readonly ratio: number;
}

/** Spawns our server with ARGS and resolves once `/readyz` answers 200: the process and the times to listening and to ready. */
async function startOursReady(args: readonly string[], nodeFlags: readonly string[] = []): Promise<{ server: ServerProcess; listeningMs: number; readyMs: number }> {
  const started = performance.now();
  const server = await startOurs(args, nodeFlags);
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

/** The floor's cold start: process start to its listening line (it loads Fastify and listens with TLS). */
async function floorStartMs(): Promise<number> {
  const responseFile = join(work, 'floor-cold-start.json');
  writeFileSync(responseFile, '{}');
  const started = performance.now();
  const floor = await startFloor(responseFile);
  const ms = performance.now() - started;
  await floor.stop();
  return ms;
}

/** Ours (process start to the first `/readyz` 200, certificates already made) and the floor, alternating; medians. */
async function coldStart(args: readonly string[] = []): Promise<ColdStart> {
  const startsMs: number[] = [];
  const listeningMs: number[] = [];
  const floorMs: number[] = [];
  for (let i = 0; i < SETTINGS.coldStarts; i++) {
    // ABBA, as the load rounds: a drift of the machine falls on both.
    if (i % 2 === 1) floorMs.push(await floorStartMs());
    const { server, listeningMs: listening, readyMs } = await startOursReady(args);
    await server.stop();
    startsMs.push(readyMs);
    listeningMs.push(listening);
    if (i % 2 === 0) floorMs.push(await floorStartMs());
  }
  const medianMs = median(startsMs);
  const floorMedianMs = median(floorMs);
  return { startsMs, medianMs, listeningMedianMs: median(listeningMs), floorMedianMs, ratio: medianMs / floorMedianMs };
}

/** Memory of a process at rest after full GCs (see gc-on-signal.ts). */
interface AtRest {
  readonly rssBytes: number;
  readonly peakRssBytes: number;
  readonly heapUsedBytes: number;
  readonly heapTotalBytes: number;
  readonly externalBytes: number;
}

const GC_SCRIPT = compileBenchScript('gc-on-signal');
const GC_FLAGS = ['--expose-gc', '--import', GC_SCRIPT];

/** SIGUSR2 to a server started with GC_FLAGS, wait for its memoryUsage line, then its RSS. */
async function atRest(server: ServerProcess): Promise<AtRest> {
  const seen = server.stderr.length;
  process.kill(server.pid, 'SIGUSR2');
  const started = performance.now();
  let line: string | undefined;
  while ((line = server.stderr.slice(seen).find((entry) => entry.startsWith('bench-gc '))) === undefined) {
    if (performance.now() - started > 30_000) throw new Error(`no GC report from pid ${server.pid} within 30 s of SIGUSR2`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const usage = JSON.parse(line.slice('bench-gc '.length)) as NodeJS.MemoryUsage;
  const memory = readMemory(server.pid);
  return { rssBytes: memory.rss, peakRssBytes: memory.hwm, heapUsedBytes: usage.heapUsed, heapTotalBytes: usage.heapTotal, externalBytes: usage.external };
}

interface ClusterFigures {
  /** Which API server the injector followed (a real one, or the fake one and why). */
  readonly apiServer: string;
  readonly coldStart: ColdStart;
  /** Seconds from ready to the GC and the reading. */
  readonly restSeconds: number;
  readonly ours: AtRest;
  /** The floor server idle, after the same GC: what Node + Fastify + TLS weigh. */
  readonly floor: AtRest;
}

/** The injector following a cluster (both watches open): cold start to ready, and memory at rest after a GC. */
async function clusterFigures(): Promise<ClusterFigures> {
  const cluster = await startBenchCluster();
  log(`  cluster: ${cluster.kind}`);
  try {
    const args = ['--kubeconfig', cluster.kubeconfigPath, '--namespace', CLUSTER_NAMESPACE];
    const cold = await coldStart(args);
    log(`  cluster cold start: median ${cold.medianMs.toFixed(0)} ms (floor ${cold.floorMedianMs.toFixed(0)} ms)`);
    const { server } = await startOursReady(args, GC_FLAGS);
    const responseFile = join(work, 'floor-at-rest.json');
    writeFileSync(responseFile, '{}');
    const floor = await startServer([...GC_FLAGS, FLOOR_SCRIPT, join(certsDir, 'tls.crt'), join(certsDir, 'tls.key'), responseFile], 'floor serving https');
    try {
      await new Promise((resolve) => setTimeout(resolve, SETTINGS.restSeconds * 1000));
      return { apiServer: cluster.kind, coldStart: cold, restSeconds: SETTINGS.restSeconds, ours: await atRest(server), floor: await atRest(floor) };
    } finally {
      await Promise.all([server.stop(), floor.stop()]);
    }
  } finally {
    await cluster.stop();
  }
}

interface ShippedSize {
  /** dist/bundle/: what the image carries besides bin/ and package.json (it has no node_modules). */
  readonly bundleBytes: number;
  /** Of which the source maps (for NODE_OPTIONS=--enable-source-maps). */
  readonly sourceMapBytes: number;
}

/** What the image ships: the bundle with every runtime dependency in it (scripts/bundle.ts). */
function shippedSize(): ShippedSize {
  const files = readdirSync(join(ROOT, 'dist', 'bundle'), { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
  const size = (entries: typeof files): number => entries.reduce((sum, entry) => sum + statSync(join(entry.parentPath, entry.name)).size, 0);
  return { bundleBytes: size(files), sourceMapBytes: size(files.filter((entry) => entry.name.endsWith('.map'))) };
}

interface Target {
  readonly name: string;
  readonly value: string;
  readonly limit: string;
  readonly pass: boolean;
}

function versionOf(name: string): string {
  return (JSON.parse(readFileSync(join(ROOT, 'node_modules', name, 'package.json'), 'utf8')) as { version: string }).version;
}

function srcDirty(): boolean | undefined {
  try {
    return execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() !== '';
  } catch {
    return undefined;
  }
}

function gitCommit(): string | undefined {
  try {
    return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
  } catch {
    return undefined;
  }
}

const fmt = {
  rps: (value: number): string => value.toFixed(0),
  ms: (value: number): string => value.toFixed(2),
  mib: (bytes: number): string => (bytes / MIB).toFixed(1),
  ratio: (value: number): string => `${value.toFixed(2)}×`,
};

function table(rows: readonly (readonly string[])[]): string {
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  return rows.map((row) => row.map((cell, column) => (column === 0 ? cell.padEnd(widths[column] ?? 0) : cell.padStart(widths[column] ?? 0))).join('  ')).join('\n');
}

function machineInfo() {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    node: process.version,
    fastify: versionOf('fastify'),
    autocannon: versionOf('autocannon'),
    commit: gitCommit(),
    /** Uncommitted changes under src/ were built into dist/ and measured. */
    srcDirty: srcDirty(),
    /** The image's node flags, then any --ours-node-flags. */
    oursNodeFlags: [...IMAGE_NODE_FLAGS, ...OURS_NODE_FLAGS],
  };
}

function header(startedAt: Date, machine: ReturnType<typeof machineInfo>): string {
  return [
    '',
    `envoy-injector bench, ${startedAt.toISOString()}, commit ${machine.commit ?? '?'}${machine.srcDirty ? ' + uncommitted src/' : ''}` +
      (machine.oursNodeFlags.length > 0 ? `, ours run with ${machine.oursNodeFlags.join(' ')}` : ''),
    `${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}, Fastify ${machine.fastify}, autocannon ${machine.autocannon}${QUICK ? ' (QUICK: short rounds, not comparable)' : ''}`,
  ].join('\n');
}

function scenarioTable(scenarios: readonly ScenarioResult[]): string {
  const rows: string[][] = [
    ['scenario', 'server', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'errors', 'peak RSS MiB', 'CPU µs/req', 'ours/floor req/s', 'ours/floor p99', 'ours/floor CPU', 'other work'],
  ];
  for (const scenario of scenarios) {
    for (const side of ['ours', 'floor'] as const) {
      const figure = scenario[side];
      rows.push([
        side === 'ours' ? scenario.name : '',
        side,
        String(scenario.connections),
        fmt.rps(figure.requestsPerSecond),
        fmt.ms(figure.p50Ms),
        fmt.ms(figure.p99Ms),
        fmt.ms(figure.maxMs),
        String(figure.errors),
        fmt.mib(side === 'ours' ? scenario.oursPeakRssBytes : scenario.floorPeakRssBytes),
        figure.cpuUsPerRequest.toFixed(0),
        side === 'ours' ? fmt.ratio(scenario.ratios.throughput) : '',
        side === 'ours' ? fmt.ratio(scenario.ratios.p99) : '',
        side === 'ours' ? fmt.ratio(scenario.ratios.cpuPerRequest) : '',
        side === 'ours' ? `${(scenario.otherCpu.mean * 100).toFixed(0)}%` : '',
      ]);
    }
  }
  return table(rows);
}


async function main(): Promise<void> {
  const startedAt = new Date();
  log(`bench: work dir ${work}`);
  log('bench: precomputing the floor responses with our server');
  const responses = await precomputeResponses();

  const scenarios: ScenarioResult[] = [];
  for (const scenario of SCENARIOS) {
    log(`bench: scenario ${scenario.name} (${scenario.description}), ${scenario.connections} connections`);
    scenarios.push(await runScenario(scenario, responses.get(scenario.name) ?? ''));
  }
  let memory: MemoryFlatness | undefined;
  if (selected('memory')) {
    log(`bench: memory flatness, ${SETTINGS.memoryRequests.join(' then ')} seed requests`);
    memory = await memoryFlatness();
  }
  let cold: ColdStart | undefined;
  if (selected('coldstart')) {
    log('bench: cold start');
    cold = await coldStart();
  }
  let cluster: ClusterFigures | undefined;
  if (selected('cluster')) {
    log(`bench: cluster mode (cold start, then at rest ${SETTINGS.restSeconds} s after ready)`);
    cluster = await clusterFigures();
  }
  let shipped: ShippedSize | undefined;
  if (selected('size')) {
    shipped = shippedSize();
  }

  const targets = evaluateTargets(scenarios, memory, cold, cluster);
  const machine = machineInfo();
  const out: string[] = [header(startedAt, machine), ''];
  if (scenarios.length > 0) {
    out.push(scenarioTable(scenarios), '');
    const other = Math.max(...scenarios.map((scenario) => scenario.otherCpu.max));
    if (other > 0.1) {
      out.push(`note: other work took up to ${(other * 100).toFixed(0)}% of the machine's CPU during a round: req/s and latency are noisy; CPU µs/req is the steadier figure`, '');
    }
  }
  if (memory !== undefined) {
    out.push(`memory flatness: ${memoryFlatnessText(memory)}`);
  }
  if (cold !== undefined) out.push(`cold start, local: ${coldStartText(cold)}`);
  if (cluster !== undefined) out.push(...clusterText(cluster));
  if (shipped !== undefined) out.push(`shipped: ${shippedText(shipped)}`);
  out.push('', table([['target', 'value', 'limit', ''], ...targets.map((target) => [target.name, target.value, target.limit, target.pass ? 'PASS' : 'FAIL'])]), '');
  process.stdout.write(`${out.join('\n')}\n`);

  const results = { date: startedAt.toISOString(), quick: QUICK, only: ONLY ?? null, machine, settings: SETTINGS, scenarios, memory: memory ?? null, coldStart: cold ?? null, cluster: cluster ?? null, shippedSize: shipped ?? null, targets };
  if (!flags['no-write']) {
    const dir = join(ROOT, 'bench', 'results');
    mkdirSync(dir, { recursive: true });
    const text = `${JSON.stringify(results, null, 2)}\n`;
    const stamp = startedAt.toISOString().replace(/:/g, '').replace(/\.\d+Z$/, 'Z');
    // Only a full run is a result to keep; a quick or partial one goes to an ignored *.tmp file.
    const complete = !QUICK && ONLY === undefined;
    const name = complete ? `${stamp}.json` : `partial-${stamp}.json.tmp`;
    writeFileSync(join(dir, name), text);
    if (complete) {
      writeFileSync(join(dir, 'latest.json'), text);
      updateReadme(markdownSummary(startedAt, machine, scenarios, memory, cold, cluster, shipped, targets));
    }
    log(`bench: results in bench/results/${name}${complete ? ', bench/results/latest.json and the table in bench/README.md' : ''}`);
  }
}

const README_START = '<!-- latest-results:start (written by bench/run.ts) -->';
const README_END = '<!-- latest-results:end -->';

/** Replaces the block between the markers in bench/README.md with the latest figures. */
function updateReadme(block: string): void {
  const file = join(ROOT, 'bench', 'README.md');
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return;
  }
  const start = text.indexOf(README_START);
  const end = text.indexOf(README_END);
  if (start === -1 || end < start) return;
  writeFileSync(file, `${text.slice(0, start + README_START.length)}\n${block}\n${text.slice(end)}`);
}

function markdownSummary(
  startedAt: Date,
  machine: ReturnType<typeof machineInfo>,
  scenarios: readonly ScenarioResult[],
  memory: MemoryFlatness | undefined,
  cold: ColdStart | undefined,
  cluster: ClusterFigures | undefined,
  shipped: ShippedSize | undefined,
  targets: readonly Target[],
): string {
  const lines: string[] = [];
  lines.push(
    `Run of ${startedAt.toISOString().slice(0, 16).replace('T', ' ')} UTC, commit \`${machine.commit ?? '?'}\`${machine.srcDirty ? ' plus uncommitted changes under src/' : ''}; ` +
      `${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}, Fastify ${machine.fastify}, autocannon ${machine.autocannon}. ` +
      `Other work on the machine during the rounds: ${(mean(scenarios.map((scenario) => scenario.otherCpu.mean)) * 100).toFixed(0)}% of its CPU on average, up to ${(Math.max(...scenarios.map((scenario) => scenario.otherCpu.max)) * 100).toFixed(0)}% in a round.`,
    '',
    '| scenario | conns | ours req/s | floor req/s | ours/floor req/s | ours p50 / p99 / max ms | floor p50 / p99 / max ms | ours/floor p99 | CPU µs/req ours / floor | errors | ours peak RSS |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  );
  for (const scenario of scenarios) {
    const { ours, floor } = scenario;
    lines.push(
      `| ${scenario.name} | ${scenario.connections} | ${fmt.rps(ours.requestsPerSecond)} | ${fmt.rps(floor.requestsPerSecond)} | ${fmt.ratio(scenario.ratios.throughput)} | ` +
        `${fmt.ms(ours.p50Ms)} / ${fmt.ms(ours.p99Ms)} / ${fmt.ms(ours.maxMs)} | ${fmt.ms(floor.p50Ms)} / ${fmt.ms(floor.p99Ms)} / ${fmt.ms(floor.maxMs)} | ${fmt.ratio(scenario.ratios.p99)} | ` +
        `${ours.cpuUsPerRequest.toFixed(0)} / ${floor.cpuUsPerRequest.toFixed(0)} | ${ours.errors} | ${fmt.mib(scenario.oursPeakRssBytes)} MiB |`,
    );
  }
  lines.push('');
  if (memory !== undefined) {
    lines.push(`- Memory flatness: ${memoryFlatnessText(memory)}.`);
  }
  if (cold !== undefined) lines.push(`- Cold start to the first \`/readyz\` 200, local mode: ${coldStartText(cold)}.`);
  if (cluster !== undefined) lines.push(...clusterText(cluster).map((line) => `- ${line}.`));
  if (shipped !== undefined) lines.push(`- Shipped: ${shippedText(shipped)}.`);
  lines.push('', '| target | value | |', '|---|--:|---|', ...targets.map((target) => `| ${target.name} | ${target.value} | ${target.pass ? 'PASS' : '**FAIL**'} |`));
  return lines.join('\n');
}

function coldStartText(cold: ColdStart): string {
  return `median ${cold.medianMs.toFixed(0)} ms of ${cold.startsMs.length} starts (listening after ${cold.listeningMedianMs.toFixed(0)} ms), the floor ${cold.floorMedianMs.toFixed(0)} ms: ${fmt.ratio(cold.ratio)}`;
}

function atRestText(rest: AtRest): string {
  return `RSS ${fmt.mib(rest.rssBytes)} MiB (peak ${fmt.mib(rest.peakRssBytes)}; V8 heap ${fmt.mib(rest.heapUsedBytes)} used of ${fmt.mib(rest.heapTotalBytes)}, external ${fmt.mib(rest.externalBytes)})`;
}

function clusterText(cluster: ClusterFigures): string[] {
  return [
    `Cluster mode, following a ${cluster.apiServer}: cold start to \`/readyz\` 200 with both watches ${coldStartText(cluster.coldStart)}`,
    `At rest in a cluster, ${cluster.restSeconds} s after ready, after a full GC: ours ${atRestText(cluster.ours)}; the floor idle ${atRestText(cluster.floor)}`,
  ];
}

/** PASS/FAIL per target, for the parts that ran. Timing never fails the run: these are reported, not asserted. */
function evaluateTargets(scenarios: readonly ScenarioResult[], memory: MemoryFlatness | undefined, cold: ColdStart | undefined, cluster: ClusterFigures | undefined): Target[] {
  const targets: Target[] = [];
  const seed = scenarios.find((scenario) => scenario.name === 'seed');
  if (seed !== undefined) {
    targets.push(
      { name: 'seed throughput ≥ 0.8× floor', value: fmt.ratio(seed.ratios.throughput), limit: '≥ 0.80×', pass: seed.ratios.throughput >= 0.8 },
      { name: 'seed p99 ≤ 1.3× floor (same concurrency)', value: fmt.ratio(seed.ratios.p99), limit: '≤ 1.30×', pass: seed.ratios.p99 <= 1.3 },
      { name: 'seed CPU µs/req ≤ 1.3× floor', value: fmt.ratio(seed.ratios.cpuPerRequest), limit: '≤ 1.30×', pass: seed.ratios.cpuPerRequest <= 1.3 },
    );
  }
  // Peak RSS over the floor's in the same scenario: what our code and heap add to the same stack.
  for (const [name, limitMib] of [['seed', 20], ['large', 30]] as const) {
    const scenario = scenarios.find((candidate) => candidate.name === name);
    if (scenario === undefined) continue;
    const extra = scenario.oursPeakRssBytes - scenario.floorPeakRssBytes;
    targets.push({ name: `${name} peak RSS, ours − floor ≤ +${limitMib} MiB`, value: `${extra >= 0 ? '+' : ''}${fmt.mib(extra)} MiB`, limit: `≤ +${limitMib} MiB`, pass: extra <= limitMib * MIB });
  }
  const errors = (memory?.errors ?? 0) + scenarios.reduce((sum, scenario) => sum + scenario.ours.errors, 0);
  targets.push({ name: 'zero errors (ours, every run)', value: String(errors), limit: '0', pass: errors === 0 });
  const peaks = [...(memory === undefined ? [] : [memory.peakRssBytes]), ...scenarios.map((scenario) => scenario.oursPeakRssBytes)];
  if (peaks.length > 0) {
    const peak = Math.max(...peaks);
    targets.push({ name: 'peak RSS < 150 MiB (ours, every run)', value: `${fmt.mib(peak)} MiB`, limit: '< 150 MiB', pass: peak < 150 * MIB });
  }
  if (memory !== undefined) {
    targets.push({
      name: `RSS after GC, ${memory.samples.at(-1)?.requests} requests within 15% of ${memory.samples[0]?.requests}`,
      value: `${((memory.ratio - 1) * 100).toFixed(1)}%`,
      limit: '±15%',
      pass: Math.abs(memory.ratio - 1) <= 0.15,
    });
  }
  if (cold !== undefined) {
    targets.push(
      { name: 'cold start < 1 s (median)', value: `${cold.medianMs.toFixed(0)} ms`, limit: '< 1000 ms', pass: cold.medianMs < 1000 },
      { name: 'cold start, local, ≤ 1.5× the floor', value: fmt.ratio(cold.ratio), limit: '≤ 1.50×', pass: cold.ratio <= 1.5 },
    );
  }
  if (cluster !== undefined) {
    targets.push(
      { name: 'cold start, cluster, ≤ 2.5× the floor', value: fmt.ratio(cluster.coldStart.ratio), limit: '≤ 2.50×', pass: cluster.coldStart.ratio <= 2.5 },
      { name: 'RSS at rest in a cluster ≤ 80 MiB', value: `${fmt.mib(cluster.ours.rssBytes)} MiB`, limit: '≤ 80 MiB', pass: cluster.ours.rssBytes <= 80 * MIB },
    );
  }
  return targets;
}

try {
  await main();
} finally {
  cleanUp();
}
