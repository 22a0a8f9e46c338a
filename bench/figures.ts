import type { LoadResult } from './load.js';

/** What the bench measures, as the results file records it, and the arithmetic over rounds. */

/** One load run and the CPU time the server spent on it. */
export interface Round extends LoadResult {
  readonly serverCpuSeconds: number;
  readonly cpuUsPerRequest: number;
  /**
   * Share of the machine's CPU (all cores, over the round) used by anything
   * but the server, the load worker and this harness: other work, which makes
   * req/s and latency noisy.
   */
  readonly otherCpuShare: number;
}

export interface ServerFigures {
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

export interface ScenarioResult {
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
  /**
   * Ours' CPU per request over the floor's, round by round (each of ours' rounds
   * against the floor's next to it in the ABBA order): the lowest and highest,
   * how far one round's ratio strays from the run's.
   */
  readonly cpuRatioByRound: { readonly lowest: number; readonly highest: number };
  /** Mean and highest share of the machine's CPU used by other work during the rounds. */
  readonly otherCpu: { readonly mean: number; readonly max: number };
}

export interface MemorySample {
  readonly requests: number;
  /** RSS as the load ends, garbage included. */
  readonly rssBytes: number;
  /** After full GCs (see atRest): what is still held. A leak grows these; uncollected garbage does not. */
  readonly afterGc: AtRest;
}

export interface MemoryFlatness {
  readonly samples: readonly MemorySample[];
  readonly peakRssBytes: number;
  readonly errors: number;
  /** RSS after a full GC, after the last count over after the first. */
  readonly ratio: number;
}

export interface ColdStart {
  readonly startsMs: readonly number[];
  readonly medianMs: number;
  /** Of the same starts: process start to the "serving" log line. */
  readonly listeningMedianMs: number;
  /** The floor (Fastify with TLS, nothing else): process start to listening, median of as many starts. */
  readonly floorMedianMs: number;
  readonly ratio: number;
}

/** Memory of a process at rest after full GCs (see gc-on-signal.ts). */
export interface AtRest {
  readonly rssBytes: number;
  readonly peakRssBytes: number;
  readonly heapUsedBytes: number;
  readonly heapTotalBytes: number;
  readonly externalBytes: number;
}

export interface ClusterFigures {
  /** Which API server the injector followed (a real one, or the fake one and why). */
  readonly apiServer: string;
  readonly coldStart: ColdStart;
  /** Seconds from ready to the GC and the reading. */
  readonly restSeconds: number;
  readonly ours: AtRest;
  /** The floor server idle, after the same GC: what Node + Fastify + TLS weigh. */
  readonly floor: AtRest;
}


export interface ShippedSize {
  /** dist/bundle/: what the image carries besides bin/ and package.json (it has no node_modules). */
  readonly bundleBytes: number;
  /** Of which the source maps (for NODE_OPTIONS=--enable-source-maps). */
  readonly sourceMapBytes: number;
}


export function errorsOf(result: LoadResult): number {
  return result.non2xx + result.socketErrors + result.timeouts;
}

export function mean(values: readonly number[]): number {
  return values.reduce((sum, value) => sum + value, 0) / values.length;
}

export function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? NaN) : ((sorted[middle - 1] ?? NaN) + (sorted[middle] ?? NaN)) / 2;
}

export function figures(rounds: readonly Round[], warmups: readonly LoadResult[]): ServerFigures {
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

/** The i-th rounds of ours and the floor ran next to each other (ours, floor, floor, ours, …): their CPU ratios' range. */
export function cpuRatioByRound(ours: readonly Round[], floor: readonly Round[]): ScenarioResult['cpuRatioByRound'] {
  const ratios = ours.map((round, index) => round.cpuUsPerRequest / (floor[index]?.cpuUsPerRequest ?? NaN));
  return { lowest: Math.min(...ratios), highest: Math.max(...ratios) };
}
