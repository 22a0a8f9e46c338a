/**
 * What a Pod CREATE pays for injection, through a real kube-apiserver
 * (issues 27 and 39): the five paths of cluster-paths.ts measured alternately in one
 * run, CLIENTS creating Pods at once; the API server's own metric of its
 * webhook calls (calls per Pod, mean call time); and a Deployment scaled
 * 0 → N per path, timed until its last Pod is stored.
 */
import { Agent } from 'node:https';
import { performance } from 'node:perf_hooks';
import { callsBetween, webhookCalls, type WebhookCalls } from '../test/e2e/apiserver-metrics.js';
import { addCpu, cpuPerPod, cpuRows, readCpu, zeroCpu, type CpuPerPod, type CpuPids, type CpuSeconds } from './cluster-cpu.js';
import { PATH_DESCRIPTIONS, PATH_WEBHOOKS, PATHS, startBenchPaths, type BenchPaths, type PathName } from './cluster-paths.js';
import { fmt, table } from './format.js';
import { log } from './harness.js';
import { apiCall, createPods, percentile, watchPodsAdded } from './pod-load.js';

export interface ApiServerSettings {
  readonly kubeVersion: '1.34' | '1.36';
  /** Pods per path, over all rounds. */
  readonly podsPerPath: number;
  readonly rounds: number;
  readonly clients: number;
  /** The Deployment's replicas when scaled up (0 = not measured). */
  readonly replicas: number;
}

export interface PathFigures {
  readonly path: PathName;
  readonly description: string;
  readonly pods: number;
  readonly refused: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly podsPerSecond: number;
  /** The API server's webhook calls for this path's Pods (its metric), per webhook; none for paths without one. */
  readonly webhookCalls: { readonly count: number; readonly meanMs: number } | undefined;
  /** Seconds from scaling the Deployment up to its last Pod stored. */
  readonly deploymentSeconds: number | undefined;
  /** CPU per Pod of each process over this path's rounds (cluster-cpu.ts). */
  readonly cpu: CpuPerPod;
}

export interface ApiServerFigures {
  readonly apiServer: string;
  readonly settings: ApiServerSettings;
  readonly paths: readonly PathFigures[];
  /** The first refusals seen, for the report. */
  readonly refusals: readonly string[];
}

interface Collected {
  latencies: number[];
  refused: string[];
  seconds: number;
  calls: { count: number; sum: number };
  cpu: CpuSeconds;
  deploymentSeconds?: number;
}

/** Paths in a new order each round (rotated, every other round reversed), so drift on the machine falls on all. */
function roundOrder(round: number): PathName[] {
  const rotated = PATHS.map((_, index) => PATHS[(index + round) % PATHS.length] ?? 'none');
  return round % 2 === 0 ? rotated : rotated.reverse();
}

function addCalls(into: Collected, path: PathName, delta: ReadonlyMap<string, WebhookCalls>): void {
  for (const name of PATH_WEBHOOKS[path]) {
    const calls = delta.get(name);
    if (calls === undefined) continue;
    into.calls.count += calls.count;
    into.calls.sum += calls.sum;
  }
}

/** The PIDs of every process the Pods' CPU is read from. */
function benchPids(paths: BenchPaths): CpuPids {
  const pid = (name: string): number | undefined => paths.plane.processes.find((managed) => managed.name === name)?.child.pid;
  return {
    'kube-apiserver': pid('kube-apiserver'),
    etcd: pid('etcd'),
    'kube-controller-manager': pid('kube-controller-manager'),
    injector: paths.processes.injector.child.pid,
    'floor webhook': paths.processes.floor.pid,
    'policy controller': paths.processes.policy.child.pid,
  };
}

async function measurePods(paths: BenchPaths, settings: ApiServerSettings, collected: Record<PathName, Collected>): Promise<void> {
  const pids = benchPids(paths);
  const perRound = Math.max(1, Math.round(settings.podsPerPath / settings.rounds));
  // A warm-up per path: connections, caches, the memo's first answer.
  for (const path of PATHS) await createPods(paths.plane, paths.namespaces[path], paths.pod, Math.min(20, perRound), settings.clients);
  for (let round = 0; round < settings.rounds; round++) {
    for (const path of roundOrder(round)) {
      const before = await webhookCalls(paths.plane);
      const cpuBefore = readCpu(pids);
      const run = await createPods(paths.plane, paths.namespaces[path], paths.pod, perRound, settings.clients);
      addCpu(collected[path].cpu, cpuBefore, readCpu(pids));
      addCalls(collected[path], path, callsBetween(before, await webhookCalls(paths.plane)));
      collected[path].latencies.push(...run.latenciesMs);
      collected[path].refused.push(...run.refused);
      collected[path].seconds += run.elapsedSeconds;
      log(`  pods ${path.padEnd(7)} round ${round + 1}/${settings.rounds}: ${run.latenciesMs.length} stored in ${run.elapsedSeconds.toFixed(1)} s, ${run.refused.length} refused`);
    }
  }
}

/** Scales a Deployment of the seed's Pod from 0 to REPLICAS in NAMESPACE; seconds until its last Pod is stored. */
async function scaleUp(paths: BenchPaths, namespace: string, replicas: number): Promise<number> {
  const agent = new Agent({ keepAlive: true, maxSockets: 2 });
  const labels = { app: 'scaled' };
  const template = { metadata: { labels }, spec: (paths.pod as { spec: unknown }).spec };
  const base = `/apis/apps/v1/namespaces/${namespace}/deployments`;
  try {
    const created = await apiCall(paths.plane, agent, 'POST', base, { apiVersion: 'apps/v1', kind: 'Deployment', metadata: { name: 'scaled' }, spec: { replicas: 0, selector: { matchLabels: labels }, template } });
    if (created.status !== 201) throw new Error(`create Deployment in ${namespace}: ${created.status}: ${created.body.slice(0, 300)}`);
    const watch = await watchPodsAdded(paths.plane, namespace, 'app=scaled', replicas);
    try {
      const started = performance.now();
      const scaled = await apiCall(paths.plane, agent, 'PATCH', `${base}/scaled/scale`, { spec: { replicas } }, 'application/merge-patch+json');
      if (scaled.status !== 200) throw new Error(`scale Deployment in ${namespace}: ${scaled.status}: ${scaled.body.slice(0, 300)}`);
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Deployment in ${namespace}: not ${replicas} Pods after 600 s`)), 600_000);
      });
      try {
        await Promise.race([watch.done, timeout]);
      } finally {
        clearTimeout(timer);
      }
      return (performance.now() - started) / 1000;
    } finally {
      watch.close();
    }
  } finally {
    agent.destroy();
  }
}

function pathFigures(path: PathName, data: Collected): PathFigures {
  const sorted = [...data.latencies].sort((a, b) => a - b);
  return {
    path,
    description: PATH_DESCRIPTIONS[path],
    pods: sorted.length,
    refused: data.refused.length,
    p50Ms: percentile(sorted, 50),
    p90Ms: percentile(sorted, 90),
    p99Ms: percentile(sorted, 99),
    podsPerSecond: sorted.length / data.seconds,
    webhookCalls: PATH_WEBHOOKS[path].length === 0 ? undefined : { count: data.calls.count, meanMs: data.calls.count === 0 ? NaN : (data.calls.sum / data.calls.count) * 1000 },
    deploymentSeconds: data.deploymentSeconds,
    cpu: cpuPerPod(data.cpu, sorted.length + data.refused.length),
  };
}

export async function apiServerFigures(settings: ApiServerSettings): Promise<ApiServerFigures> {
  const paths = await startBenchPaths(settings.kubeVersion);
  try {
    const collected = Object.fromEntries(PATHS.map((path) => [path, { latencies: [], refused: [], seconds: 0, calls: { count: 0, sum: 0 }, cpu: zeroCpu() }])) as unknown as Record<PathName, Collected>;
    await measurePods(paths, settings, collected);
    if (settings.replicas > 0) {
      for (const path of roundOrder(1)) {
        collected[path].deploymentSeconds = await scaleUp(paths, paths.namespaces[path], settings.replicas);
        log(`  deployment ${path.padEnd(7)} 0 → ${settings.replicas}: ${collected[path].deploymentSeconds?.toFixed(1)} s`);
      }
    }
    const refusals = PATHS.flatMap((path) => collected[path].refused.slice(0, 2).map((message) => `${path}: ${message}`));
    return { apiServer: `real kube-apiserver ${paths.plane.version}`, settings, paths: PATHS.map((path) => pathFigures(path, collected[path])), refusals };
  } finally {
    await paths.stop();
  }
}

const byPath = (figures: ApiServerFigures, path: PathName): PathFigures | undefined => figures.paths.find((entry) => entry.path === path);

/** The five-path table, as rows (header first). */
export function apiServerRows(figures: ApiServerFigures): string[][] {
  const none = byPath(figures, 'none');
  const rows = [['path', 'Pods', 'refused', 'p50 ms', 'p90 ms', 'p99 ms', 'p50 / none', 'Pods/s', 'webhook calls', 'calls per Pod', 'mean call ms', `Deployment 0→${figures.settings.replicas} s`, 'vs none']];
  for (const entry of figures.paths) {
    const calls = entry.webhookCalls;
    rows.push([
      entry.description,
      String(entry.pods),
      String(entry.refused),
      fmt.ms(entry.p50Ms),
      fmt.ms(entry.p90Ms),
      fmt.ms(entry.p99Ms),
      none === undefined ? '' : fmt.ratio(entry.p50Ms / none.p50Ms),
      entry.podsPerSecond.toFixed(0),
      calls === undefined ? '—' : String(calls.count),
      calls === undefined ? '—' : (calls.count / (entry.pods + entry.refused)).toFixed(2),
      calls === undefined ? '—' : fmt.ms(calls.meanMs),
      entry.deploymentSeconds === undefined ? '—' : entry.deploymentSeconds.toFixed(1),
      entry.deploymentSeconds === undefined || none?.deploymentSeconds === undefined ? '' : fmt.ratio(entry.deploymentSeconds / none.deploymentSeconds),
    ]);
  }
  return rows;
}

export function apiServerText(figures: ApiServerFigures): string[] {
  const { settings } = figures;
  return [
    `Pod CREATE through a ${figures.apiServer}: ${settings.podsPerPath} Pods per path in ${settings.rounds} alternating rounds, ${settings.clients} clients, the seed's Pod:`,
    table(apiServerRows(figures)),
    '',
    'What a Pod CREATE costs each process, CPU ms (user + system) per Pod over its path\'s rounds:',
    table(cpuRows(figures.paths)),
    ...figures.refusals.map((message) => `refused: ${message}`),
  ];
}

function markdownTable([head = [], ...rows]: readonly (readonly string[])[]): string[] {
  return [`| ${head.join(' | ')} |`, `|---|${head.slice(1).map(() => '--:').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)];
}

/** The table as bench/README.md records it. */
export function apiServerMarkdown(figures: ApiServerFigures): string {
  const [head = [], ...rows] = apiServerRows(figures);
  const { settings } = figures;
  return [
    `Pod CREATE through a ${figures.apiServer}, ${settings.podsPerPath} Pods per path in ${settings.rounds} alternating rounds, ${settings.clients} clients, the seed's Pod; a Deployment scaled 0 → ${settings.replicas} per path:`,
    '',
    `| ${head.join(' | ')} |`,
    `|---|${head.slice(1).map(() => '--:').join('|')}|`,
    ...rows.map((row) => `| ${row.join(' | ')} |`),
    '',
    ...markdownTable(cpuRows(figures.paths)),
  ].join('\n');
}
