import { parseArgs } from 'node:util';

/** The bench's command line (bench/README.md) and the settings it implies. */

export const { values: flags } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    /** The profile part (ours under the CPU profiler, seed and skip): alone, or added to --only's parts. */
    profile: { type: 'boolean', default: false },
    /** The profile part also profiles ours following a cluster (cluster.ts): the namespace lookups and Events of cluster mode. */
    'profile-cluster': { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    /** Comma-separated parts to run: scenario names (seed, skip, large, burst), memory, coldstart, cluster, size, profile, instructions, apiserver, scale. */
    only: { type: 'string' },
    /** Extra node flags for our server only, e.g. "--max-semi-space-size=4", to try a fix; recorded in the results. */
    'ours-node-flags': { type: 'string', default: '' },
    /** Timed rounds per server in each load scenario (ABBA order). */
    rounds: { type: 'string' },
    /** The cluster parts (apiserver, scale): which real kube-apiserver. */
    'kube-version': { type: 'string', default: '1.34' },
    /** apiserver: Pods per path, rounds, concurrent clients, the Deployment's replicas. */
    'apiserver-pods': { type: 'string' },
    'apiserver-rounds': { type: 'string' },
    'apiserver-clients': { type: 'string', default: '8' },
    'deployment-replicas': { type: 'string' },
    /** scale: namespaces (half enabled) and Pods. */
    'scale-namespaces': { type: 'string' },
    'scale-pods': { type: 'string' },
  },
});
export const QUICK = flags.quick;
const onlyParts = flags.only?.split(',').map((name) => name.trim());
/** The parts asked for; undefined: all. `--profile` alone is `--only profile`, with --only it adds the profile. */
export const ONLY = flags.profile ? [...(onlyParts ?? []), 'profile'] : onlyParts;
export const OURS_NODE_FLAGS = flags['ours-node-flags'].split(' ').filter((flag) => flag !== '');
export const selected = (part: string): boolean => ONLY === undefined || ONLY.includes(part);

/** The load scenarios (scenarios.ts), then the other parts. */
export const SCENARIO_NAMES = ['seed', 'skip', 'large', 'burst'] as const;
export type ScenarioName = (typeof SCENARIO_NAMES)[number];
const PARTS: readonly string[] = [...SCENARIO_NAMES, 'memory', 'coldstart', 'cluster', 'size', 'profile', 'instructions', 'apiserver', 'scale'];
const unknownParts = (ONLY ?? []).filter((part) => !PARTS.includes(part));
// Before anything is started: a typo must not leave a work dir or a process behind.
if (unknownParts.length > 0) throw new Error(`--only: unknown ${unknownParts.join(', ')} (known: ${PARTS.join(', ')})`);

/** Seconds per timed round, per warm-up, and requests for the memory check; --quick shrinks all. */
export const SETTINGS = {
  roundSeconds: QUICK ? 2 : 3,
  warmupSeconds: QUICK ? 1 : 2,
  /**
   * Rounds per server, in the order ours, floor, floor, ours, ours, … (ABBA) so that drift on the machine cancels.
   * Eight: on a quiet machine one round's CPU ratio still ranges over ±0.2 (bench/README.md, "Why ratios").
   */
  rounds: count('rounds', QUICK ? 2 : 8, 1),
  burstSize: 2000,
  memoryRequests: QUICK ? [2_000, 20_000] : [20_000, 200_000],
  coldStarts: QUICK ? 3 : 7,
  /** The profile part: seconds of load under the profiler per scenario (after a warm-up). */
  profileSeconds: QUICK ? 2 : 10,
  /** Cluster mode: seconds from ready to the at-rest reading. */
  restSeconds: QUICK ? 5 : 60,
  /** The real API server parts (bench/cluster-latency.ts, bench/cluster-scale.ts): Pods per path and the rest, see bench/README.md. */
  apiServer: {
    kubeVersion: kubeVersion(flags['kube-version']),
    podsPerPath: count('apiserver-pods', QUICK ? 80 : 3600),
    rounds: count('apiserver-rounds', QUICK ? 2 : 12),
    clients: count('apiserver-clients', 8),
    replicas: count('deployment-replicas', QUICK ? 50 : 500),
  },
  scale: {
    kubeVersion: kubeVersion(flags['kube-version']),
    namespaces: count('scale-namespaces', QUICK ? 200 : 5000),
    baselineNamespaces: 20,
    pods: count('scale-pods', QUICK ? 200 : 5000),
    restSeconds: QUICK ? 5 : 60,
  },
  /** The whole run is killed past this (a hung child must not hang CI or a terminal); the real API server parts add theirs. */
  deadlineMs: (15 + (selected('instructions') ? 25 : 0) + (selected('apiserver') ? 30 : 0) + (selected('scale') ? 30 : 0)) * 60_000,
} as const;

function count(flag: 'rounds' | 'apiserver-pods' | 'apiserver-rounds' | 'apiserver-clients' | 'deployment-replicas' | 'scale-namespaces' | 'scale-pods', fallback: number, least = 0): number {
  const text = flags[flag];
  if (text === undefined) return fallback;
  const value = Number(text);
  if (!Number.isInteger(value) || value < least) throw new Error(`--${flag}: not a count${least > 0 ? ` of at least ${least}` : ''}: ${text}`);
  return value;
}

function kubeVersion(text: string): '1.34' | '1.36' {
  if (text !== '1.34' && text !== '1.36') throw new Error(`--kube-version: 1.34 or 1.36 (MutatingAdmissionPolicy is needed), not ${text}`);
  return text;
}
