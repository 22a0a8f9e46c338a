import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { mean, type AtRest, type ClusterFigures, type ColdStart, type MemoryFlatness, type ScenarioResult, type ShippedSize } from './figures.js';
import { fmt, table } from './format.js';
import { IMAGE_MALLOC_ENV, IMAGE_NODE_FLAGS } from './harness.js';
import { OURS_NODE_FLAGS, QUICK } from './options.js';
import { ROOT } from './processes.js';
import type { Target } from './targets.js';

/** What a run prints (the table, the notes, the targets) and writes into bench/README.md. */

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

/** Where and on what the run ran, recorded with its figures. */
export type MachineInfo = ReturnType<typeof machineInfo>;

export function machineInfo() {
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    node: process.version,
    fastify: versionOf('fastify'),
    autocannon: versionOf('autocannon'),
    commit: gitCommit(),
    /** Uncommitted changes under src/ were built into dist/ and measured. */
    srcDirty: srcDirty(),
    /** The image's malloc settings and node flags, then any --ours-node-flags. */
    oursNodeFlags: [...IMAGE_MALLOC_ENV, ...IMAGE_NODE_FLAGS, ...OURS_NODE_FLAGS],
  };
}

export function header(startedAt: Date, machine: MachineInfo): string {
  return [
    '',
    `envoy-injector bench, ${startedAt.toISOString()}, commit ${machine.commit ?? '?'}${machine.srcDirty ? ' + uncommitted src/' : ''}` +
      (machine.oursNodeFlags.length > 0 ? `, ours run with ${machine.oursNodeFlags.join(' ')}` : ''),
    `${machine.cpus} × ${machine.cpuModel}, Node ${machine.node}, Fastify ${machine.fastify}, autocannon ${machine.autocannon}${QUICK ? ' (QUICK: short rounds, not comparable)' : ''}`,
  ].join('\n');
}

export function scenarioTable(scenarios: readonly ScenarioResult[]): string {
  const rows: string[][] = [
    ['scenario', 'server', 'conns', 'req/s', 'p50 ms', 'p99 ms', 'max ms', 'errors', 'peak RSS MiB', 'CPU µs/req', 'ours/floor req/s', 'ours/floor p99', 'ours/floor CPU', 'CPU by round', 'other work'],
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
        side === 'ours' ? fmt.ratioRange(scenario.cpuRatioByRound) : '',
        side === 'ours' ? `${(scenario.otherCpu.mean * 100).toFixed(0)}%` : '',
      ]);
    }
  }
  return table(rows);
}


export function shippedText(shipped: ShippedSize): string {
  return `dist/bundle/ ${fmt.mib(shipped.bundleBytes)} MiB, of which source maps ${fmt.mib(shipped.sourceMapBytes)} MiB (the image has no node_modules)`;
}

export function memoryFlatnessText(memory: MemoryFlatness): string {
  const after = memory.samples.map((sample) => `${fmt.mib(sample.afterGc.rssBytes)} MiB (V8 heap ${fmt.mib(sample.afterGc.heapUsedBytes)} MiB) after ${sample.requests.toLocaleString('en-US')}`);
  const loaded = memory.samples.map((sample) => `${fmt.mib(sample.rssBytes)} MiB after ${sample.requests.toLocaleString('en-US')}`);
  return `RSS after a full GC ${after.join(', ')} requests (${((memory.ratio - 1) * 100).toFixed(1)}%); as the load ended, garbage included, ${loaded.join(', ')}`;
}

export function coldStartText(cold: ColdStart): string {
  return `median ${cold.medianMs.toFixed(0)} ms of ${cold.startsMs.length} starts (listening after ${cold.listeningMedianMs.toFixed(0)} ms), the floor ${cold.floorMedianMs.toFixed(0)} ms: ${fmt.ratio(cold.ratio)}`;
}

function atRestText(rest: AtRest): string {
  return `RSS ${fmt.mib(rest.rssBytes)} MiB (peak ${fmt.mib(rest.peakRssBytes)}; V8 heap ${fmt.mib(rest.heapUsedBytes)} used of ${fmt.mib(rest.heapTotalBytes)}, external ${fmt.mib(rest.externalBytes)})`;
}

export function clusterText(cluster: ClusterFigures): string[] {
  return [
    `Cluster mode, following a ${cluster.apiServer}: cold start to \`/readyz\` 200 with both watches ${coldStartText(cluster.coldStart)}`,
    `At rest in a cluster, ${cluster.restSeconds} s after ready, after a full GC: ours ${atRestText(cluster.ours)}; the floor idle ${atRestText(cluster.floor)}`,
  ];
}


const README_START = '<!-- latest-results:start (written by bench/run.ts) -->';
const README_END = '<!-- latest-results:end -->';

/** Replaces the block between the markers in bench/README.md with the latest figures. */
export function updateReadme(block: string): void {
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

export function markdownSummary(
  startedAt: Date,
  machine: MachineInfo,
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
    '| scenario | conns | ours req/s | floor req/s | ours/floor req/s | ours p50 / p99 / max ms | floor p50 / p99 / max ms | ours/floor p99 | CPU µs/req ours / floor | ours/floor CPU (lowest–highest round) | errors | ours peak RSS |',
    '|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|',
  );
  for (const scenario of scenarios) {
    const { ours, floor } = scenario;
    lines.push(
      `| ${scenario.name} | ${scenario.connections} | ${fmt.rps(ours.requestsPerSecond)} | ${fmt.rps(floor.requestsPerSecond)} | ${fmt.ratio(scenario.ratios.throughput)} | ` +
        `${fmt.ms(ours.p50Ms)} / ${fmt.ms(ours.p99Ms)} / ${fmt.ms(ours.maxMs)} | ${fmt.ms(floor.p50Ms)} / ${fmt.ms(floor.p99Ms)} / ${fmt.ms(floor.maxMs)} | ${fmt.ratio(scenario.ratios.p99)} | ` +
        `${ours.cpuUsPerRequest.toFixed(0)} / ${floor.cpuUsPerRequest.toFixed(0)} | ${fmt.ratio(scenario.ratios.cpuPerRequest)} (${fmt.ratioRange(scenario.cpuRatioByRound)}) | ${ours.errors} | ${fmt.mib(scenario.oursPeakRssBytes)} MiB |`,
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
