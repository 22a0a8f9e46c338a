import { readFileSync, writeFileSync } from 'node:fs';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { cpuRatioByRound, errorsOf, figures, mean, type Round, type ScenarioResult } from './figures.js';
import { caPem, load, log, startFloor, startOurs, work, writeBodies } from './harness.js';
import { httpsRequest } from './https-client.js';
import type { LoadResult } from './load.js';
import { selected, SETTINGS, type ScenarioName } from './options.js';
import { MemorySampler, readCpuSeconds, readMachineBusySeconds } from './processes.js';
import { burstReviews, largeReview, seedReview, skippedReview } from './reviews.js';

/** The load scenarios: ours and the floor answering the same reviews, round after round. */

export interface Scenario {
  readonly name: ScenarioName;
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
export const seedBody = compact(seedReview());
export const ALL_SCENARIOS: readonly Scenario[] = [
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

export const SCENARIOS = ALL_SCENARIOS.filter((scenario) => selected(scenario.name));

/** Asks our server once (CA verified) for its answer to each scenario's first body; that is what the floor will send. */
export async function precomputeResponses(scenarios: readonly Scenario[] = SCENARIOS): Promise<Map<string, string>> {
  const ours = await startOurs();
  try {
    const files = new Map<string, string>();
    for (const scenario of scenarios) {
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

export async function runScenario(scenario: Scenario, responseFile: string): Promise<ScenarioResult> {
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
      cpuRatioByRound: cpuRatioByRound(rounds.ours, rounds.floor),
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
