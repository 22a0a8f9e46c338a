/**
 * The `instructions` part: instructions executed per review, ours and the
 * floor, seed and skip. CPU time on a shared machine moves with whatever else
 * runs; an instruction count does not. Each server runs under valgrind's
 * callgrind (which counts every instruction the process executes, per
 * thread, about 50 times slower), is warmed up, its counts zeroed, then
 * serves a fixed number of reviews, and its counts are dumped: the
 * instructions of that load only. The ratio is the event loop's thread's:
 * V8's optimising compiler is still at work on its workers after a warm-up
 * this short under valgrind (half of all instructions in a first run), and
 * that compilation ends in a real server. Skipped, with one line, without
 * valgrind. (`perf stat -e instructions` would be quicker, but needs a PMU,
 * which virtual machines often lack.)
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { load, log, startFloor, startOurs, work, writeBodies } from './harness.js';
import { QUICK } from './options.js';
import type { ServerProcess } from './processes.js';
import { ALL_SCENARIOS } from './scenarios.js';

export const COUNTED_SCENARIOS = ['seed', 'skip'] as const;
/** Reviews before the counts are zeroed (the JIT's tiers settle), then reviews counted. */
const WARMUP_REVIEWS = QUICK ? 1_000 : 2_000;
const COUNTED_REVIEWS = QUICK ? 1_000 : 2_000;
/** Few connections: under valgrind the server answers in milliseconds. */
const CONNECTIONS = 4;

export interface InstructionCounts {
  readonly scenario: string;
  readonly reviews: number;
  /** Per review, the event loop's thread: what a review costs once V8 has compiled its code (the ratio of record). */
  readonly oursPerReview: number;
  readonly floorPerReview: number;
  readonly ratio: number;
  /** Per review, every thread: with V8's background compilation still under way after the warm-up, and concurrent GC. */
  readonly oursAllThreads: number;
  readonly floorAllThreads: number;
}

/** Why the part cannot run here, or undefined. */
export function instructionsUnavailable(): string | undefined {
  for (const tool of ['valgrind', 'callgrind_control']) {
    try {
      execFileSync(tool, ['--version'], { stdio: 'ignore' });
    } catch {
      return `instructions per review: skipped (no ${tool} on PATH)`;
    }
  }
  return undefined;
}

function callgrindLauncher(name: string): string[] {
  // A file per thread: the event loop's (thread 1) apart from V8's workers (the optimising compiler, concurrent GC).
  return ['valgrind', '--tool=callgrind', '--quiet', '--separate-threads=yes', `--callgrind-out-file=${join(work, `callgrind-${name}.out`)}`];
}

/** Instructions (callgrind's `Ir`) since the counts were zeroed: the event loop's thread, and all threads. */
interface Counted {
  readonly main: number;
  readonly all: number;
}

/** Dumps PID's counts and reads them: one file per thread, `<out>.<dump>-<thread>`. */
function dumpedInstructions(name: string, pid: number): Counted {
  execFileSync('callgrind_control', ['--dump', String(pid)], { stdio: 'ignore', timeout: 120_000 });
  const prefix = `callgrind-${name}.out.1-`;
  let [main, all] = [0, 0];
  for (const file of readdirSync(work).filter((candidate) => candidate.startsWith(prefix))) {
    const totals = /^(?:summary|totals): (\d+)/m.exec(readFileSync(join(work, file), 'utf8'));
    if (totals?.[1] === undefined) throw new Error(`${file}: no totals line`);
    all += Number(totals[1]);
    if (file === `${prefix}01`) main = Number(totals[1]);
  }
  if (main === 0) throw new Error(`callgrind wrote no dump of the main thread for ${name}`);
  return { main, all };
}

async function countServer(server: ServerProcess, name: string, bodiesFile: string): Promise<Counted> {
  await load(server, bodiesFile, CONNECTIONS, { amount: WARMUP_REVIEWS });
  execFileSync('callgrind_control', ['--zero', String(server.pid)], { stdio: 'ignore', timeout: 120_000 });
  const result = await load(server, bodiesFile, CONNECTIONS, { amount: COUNTED_REVIEWS });
  if (result.responses !== COUNTED_REVIEWS || result.non2xx > 0) throw new Error(`${name}: ${result.responses} responses, ${result.non2xx} not 2xx`);
  const counted = dumpedInstructions(name, server.pid);
  return { main: counted.main / COUNTED_REVIEWS, all: counted.all / COUNTED_REVIEWS };
}

/** Ours, then the floor, under callgrind, per scenario. */
export async function instructionFigures(responses: ReadonlyMap<string, string>): Promise<InstructionCounts[]> {
  const counts: InstructionCounts[] = [];
  for (const scenario of ALL_SCENARIOS.filter((candidate) => (COUNTED_SCENARIOS as readonly string[]).includes(candidate.name))) {
    const responseFile = responses.get(scenario.name);
    if (responseFile === undefined) throw new Error(`${scenario.name}: no precomputed answer`);
    const bodiesFile = writeBodies(`${scenario.name}-instructions`, scenario.bodies);
    const perReview: Record<'ours' | 'floor', Counted> = { ours: { main: 0, all: 0 }, floor: { main: 0, all: 0 } };
    for (const side of ['ours', 'floor'] as const) {
      const name = `${scenario.name}-${side}`;
      const server = side === 'ours' ? await startOurs([], [], {}, callgrindLauncher(name)) : await startFloor(responseFile, callgrindLauncher(name));
      try {
        perReview[side] = await countServer(server, name, bodiesFile);
      } finally {
        await server.stop(30_000);
      }
      log(`  instructions ${scenario.name} ${side.padEnd(5)} ${(perReview[side].main / 1000).toFixed(0)} k per review (all threads ${(perReview[side].all / 1000).toFixed(0)} k)`);
    }
    const { ours, floor } = perReview;
    counts.push({ scenario: scenario.name, reviews: COUNTED_REVIEWS, oursPerReview: ours.main, floorPerReview: floor.main, ratio: ours.main / floor.main, oursAllThreads: ours.all, floorAllThreads: floor.all });
  }
  return counts;
}

export function instructionsText(counts: readonly InstructionCounts[]): string[] {
  return counts.map(
    (count) =>
      `instructions per review, ours / floor (callgrind, ${count.reviews} reviews after ${WARMUP_REVIEWS}), ${count.scenario}: ${count.ratio.toFixed(2)}× ` +
      `(event loop ${(count.oursPerReview / 1000).toFixed(0)} k / ${(count.floorPerReview / 1000).toFixed(0)} k; all threads ${(count.oursAllThreads / 1000).toFixed(0)} k / ${(count.floorAllThreads / 1000).toFixed(0)} k)`,
  );
}
