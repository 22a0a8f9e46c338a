import { parseArgs } from 'node:util';

/** The bench's command line (bench/README.md) and the settings it implies. */

export const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    /** Comma-separated parts to run: scenario names (seed, skip, large, burst), memory, coldstart, cluster, size. */
    only: { type: 'string' },
    /** Extra node flags for our server only, e.g. "--max-semi-space-size=4", to try a fix; recorded in the results. */
    'ours-node-flags': { type: 'string', default: '' },
  },
});
export const QUICK = flags.quick;
export const ONLY = flags.only?.split(',').map((name) => name.trim());
export const OURS_NODE_FLAGS = flags['ours-node-flags'].split(' ').filter((flag) => flag !== '');
export const selected = (part: string): boolean => ONLY === undefined || ONLY.includes(part);

/** The load scenarios (scenarios.ts), then the other parts. */
export const SCENARIO_NAMES = ['seed', 'skip', 'large', 'burst'] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];
const PARTS: readonly string[] = [...SCENARIO_NAMES, 'memory', 'coldstart', 'cluster', 'size'];
const unknownParts = (ONLY ?? []).filter((part) => !PARTS.includes(part));
// Before anything is started: a typo must not leave a work dir or a process behind.
if (unknownParts.length > 0) throw new Error(`--only: unknown ${unknownParts.join(', ')} (known: ${PARTS.join(', ')})`);

/** Seconds per timed round, per warm-up, and requests for the memory check; --quick shrinks all. */
export const SETTINGS = {
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
