/**
 * The `profile` part (`npm run bench -- --profile`): our compiled server
 * under V8's sampling profiler while it serves the seed and the skip
 * scenarios, a fresh server each, warmed up first; the `.cpuprofile` files
 * kept under bench/results/profiles/ (ignored by git; open them in Chrome
 * DevTools or VS Code), and a summary: where a review's time goes per
 * stage, and the top self-time functions of our code.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';
import { STAGES, summariseProfile, type CpuProfile, type ProfileSummary, type TimeShare } from './cpu-profile.js';
import { table } from './format.js';
import { caPem, certsDir, compileBenchScript, FLOOR_SCRIPT, load, log, startOurs, startOursReady, work, writeBodies } from './harness.js';
import { httpsRequest } from './https-client.js';
import { flags, SETTINGS } from './options.js';
import { CLUSTER_NAMESPACE, startBenchCluster } from './cluster.js';
import { readCpuSeconds, ROOT, startServer, type ServerProcess } from './processes.js';
import { sourceMapLocator } from './profile-sources.js';
import { ALL_SCENARIOS, type Scenario } from './scenarios.js';

export const PROFILED_SCENARIOS = ['seed', 'skip'] as const;
/** Microseconds between samples: V8's default (1,000) would see a review a few times at most. */
const INTERVAL_US = 100;
/** How many of our functions and of the groups the summary keeps. */
const TOP_OURS = 15;
const TOP_GROUPS = 12;

/** One server profiled under one scenario. */
export interface ProfiledServer {
  /** The `.cpuprofile`, relative to the repository. */
  readonly file: string;
  readonly responses: number;
  /** The process's CPU time (user + system, /proc) over the profiled load, per review: what the shares divide. */
  readonly cpuUsPerReview: number;
  /** The summary, its lists cut to the top entries. */
  readonly summary: ProfileSummary;
}

export interface ProfiledScenario {
  /** The scenario, and `, cluster mode` when ours followed a cluster. */
  readonly name: string;
  readonly seconds: number;
  readonly intervalUs: number;
  readonly ours: ProfiledServer;
  /** The floor under the same load and profiler: what of each stage any server on this stack pays (in cluster mode, the local run's floor). */
  readonly floor: ProfiledServer;
}

export interface ProfileFigures {
  readonly scenarios: readonly ProfiledScenario[];
}

const PROFILE_SCRIPT = compileBenchScript('profile-on-signal');

/** SIGUSR2 to the profiled server, then its stderr line starting with PREFIX. */
async function signalAndWait(server: ServerProcess, prefix: string): Promise<void> {
  const seen = server.stderr.length;
  process.kill(server.pid, 'SIGUSR2');
  const started = performance.now();
  for (;;) {
    const lines = server.stderr.slice(seen);
    const failure = lines.find((line) => line.startsWith('bench-profile failed'));
    if (failure !== undefined) throw new Error(failure);
    if (lines.some((line) => line.startsWith(prefix))) return;
    if (performance.now() - started > 60_000) throw new Error(`no "${prefix}" from pid ${server.pid} within 60 s of SIGUSR2`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Warms SERVER up, then profiles it under the scenario's load into FILE. */
async function profileLoad(server: ServerProcess, scenario: Scenario, bodiesFile: string, file: string): Promise<ProfiledServer> {
  await load(server, bodiesFile, scenario.connections, { durationSeconds: SETTINGS.warmupSeconds });
  await signalAndWait(server, 'bench-profile started');
  const cpuBefore = readCpuSeconds(server.pid);
  const result = await load(server, bodiesFile, scenario.connections, { durationSeconds: SETTINGS.profileSeconds });
  const cpuSeconds = readCpuSeconds(server.pid) - cpuBefore;
  await signalAndWait(server, 'bench-profile written');
  const summary = summariseProfile(JSON.parse(readFileSync(file, 'utf8')) as CpuProfile, sourceMapLocator(ROOT));
  log(`  profile ${scenario.name}: ${result.responses} reviews, ${summary.samples} samples, ${relative(ROOT, file)}`);
  return { file: relative(ROOT, file), responses: result.responses, cpuUsPerReview: (cpuSeconds * 1e6) / Math.max(1, result.responses), summary: { ...summary, ours: summary.ours.slice(0, TOP_OURS), groups: summary.groups.slice(0, TOP_GROUPS) } };
}

const profilerEnv = (file: string): Record<string, string> => ({ BENCH_CPU_PROFILE: file, BENCH_CPU_PROFILE_INTERVAL_US: String(INTERVAL_US) });

function scenarioNamed(name: string): Scenario {
  const scenario = ALL_SCENARIOS.find((candidate) => candidate.name === name);
  if (scenario === undefined) throw new Error(`no scenario ${name}`);
  return scenario;
}

/** Ours, then the floor answering ours' answer, each a fresh process under the profiler. */
async function profileScenario(name: (typeof PROFILED_SCENARIOS)[number], dir: string, stamp: string): Promise<ProfiledScenario> {
  const scenario = scenarioNamed(name);
  const bodiesFile = writeBodies(`profile-${name}`, scenario.bodies);
  const oursFile = join(dir, `${stamp}-${name}-ours.cpuprofile`);
  const ours = await startOurs([], ['--import', PROFILE_SCRIPT], profilerEnv(oursFile));
  let oursProfile: ProfiledServer;
  const answerFile = join(work, `profile-${name}.response.json`);
  try {
    const answer = await httpsRequest(`https://127.0.0.1:${ours.port}/mutate`, { ca: caPem(), method: 'POST', body: Buffer.from(scenario.bodies[0] ?? '') });
    if (answer.status !== 200) throw new Error(`${name}: our server answered ${answer.status}`);
    writeFileSync(answerFile, answer.body);
    oursProfile = await profileLoad(ours, scenario, bodiesFile, oursFile);
  } finally {
    await ours.stop();
  }
  const floorFile = join(dir, `${stamp}-${name}-floor.cpuprofile`);
  const floor = await startServer(['--import', PROFILE_SCRIPT, FLOOR_SCRIPT, join(certsDir, 'tls.crt'), join(certsDir, 'tls.key'), answerFile], 'floor serving https', 15_000, profilerEnv(floorFile));
  try {
    return { name, seconds: SETTINGS.profileSeconds, intervalUs: INTERVAL_US, ours: oursProfile, floor: await profileLoad(floor, scenario, bodiesFile, floorFile) };
  } finally {
    await floor.stop();
  }
}

/** Ours following the bench's cluster (both watches, the namespace lookup, the Events), each scenario against its local run's floor. */
async function profileClusterMode(local: readonly ProfiledScenario[], dir: string, stamp: string): Promise<ProfiledScenario[]> {
  const cluster = await startBenchCluster();
  log(`  profile, cluster mode: ${cluster.kind}`);
  try {
    const profiled: ProfiledScenario[] = [];
    for (const localRun of local) {
      const scenario = scenarioNamed(localRun.name);
      const file = join(dir, `${stamp}-${scenario.name}-ours-cluster.cpuprofile`);
      const { server } = await startOursReady(['--kubeconfig', cluster.kubeconfigPath, '--namespace', CLUSTER_NAMESPACE], ['--import', PROFILE_SCRIPT], profilerEnv(file));
      try {
        const ours = await profileLoad(server, scenario, writeBodies(`profile-${scenario.name}-cluster`, scenario.bodies), file);
        profiled.push({ ...localRun, name: `${scenario.name}, cluster mode`, ours });
      } finally {
        await server.stop();
      }
    }
    return profiled;
  } finally {
    await cluster.stop();
  }
}

export async function profileFigures(): Promise<ProfileFigures> {
  const dir = join(ROOT, 'bench', 'results', 'profiles');
  mkdirSync(dir, { recursive: true });
  const stamp = new Date().toISOString().replace(/:/g, '').replace(/\.\d+Z$/, 'Z');
  const scenarios: ProfiledScenario[] = [];
  for (const name of PROFILED_SCENARIOS) scenarios.push(await profileScenario(name, dir, stamp));
  if (flags['profile-cluster']) scenarios.push(...(await profileClusterMode(scenarios, dir, stamp)));
  return { scenarios };
}

/** CPU µs per review of a share of a profile: the share of the samples times the process's CPU per review. */
function perReview(share: number, server: ProfiledServer): string {
  return server.responses === 0 ? '—' : (share * server.cpuUsPerReview).toFixed(1);
}

const percent = (share: number): string => `${(share * 100).toFixed(1)}%`;
const stageShare = (server: ProfiledServer, stage: string): number => server.summary.stages.find((entry) => entry.key === stage)?.share ?? 0;

/** The stages in CPU µs per review, ours and the floor's per scenario, and ours' share (header first). */
export function stageRows(figures: ProfileFigures): string[][] {
  const rows = [['stage, CPU µs/review', ...figures.scenarios.flatMap((scenario) => [`${scenario.name} ours`, `${scenario.name} floor`, `${scenario.name} ours share`])]];
  for (const stage of STAGES) {
    rows.push([
      stage,
      ...figures.scenarios.flatMap((scenario) => [perReview(stageShare(scenario.ours, stage), scenario.ours), perReview(stageShare(scenario.floor, stage), scenario.floor), percent(stageShare(scenario.ours, stage))]),
    ]);
  }
  rows.push(['total', ...figures.scenarios.flatMap((scenario) => [perReview(1, scenario.ours), perReview(1, scenario.floor), '100%'])]);
  return rows;
}

function topRows(entries: readonly TimeShare[], server: ProfiledServer, head: string): string[][] {
  return [[head, 'self', 'CPU µs/review'], ...entries.map((entry) => [entry.key, percent(entry.share), perReview(entry.share, server)])];
}

export function profileText(figures: ProfileFigures): string[] {
  const out = [
    'Where a review\'s CPU goes, ours and the floor under the sampling profiler: each one\'s share of the samples times its CPU per review over the profiled load (the profiler slows both: read shares and differences):',
    ...figures.scenarios.map(
      (scenario) => `  ${scenario.name}: ${scenario.seconds} s each, a sample every ${scenario.intervalUs} µs; ours ${scenario.ours.responses} reviews (${scenario.ours.file}), the floor ${scenario.floor.responses} (${scenario.floor.file})`,
    ),
    table(stageRows(figures)),
  ];
  for (const scenario of figures.scenarios) {
    out.push('', `${scenario.name}: top self time, our code`, table(topRows(scenario.ours.summary.ours, scenario.ours, 'function (source)')));
    out.push('', `${scenario.name}: ours' self time by package, Node module, V8`, table(topRows(scenario.ours.summary.groups, scenario.ours, 'where')));
  }
  return out;
}

/** The stage table and each scenario's top functions of ours, for bench/README.md. */
export function profileMarkdown(figures: ProfileFigures): string {
  const markdown = ([head = [], ...rows]: readonly (readonly string[])[]): string[] => [`| ${head.join(' | ')} |`, `|---|${head.slice(1).map(() => '--:').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)];
  const lines = [
    `Profile (a sample every ${figures.scenarios[0]?.intervalUs ?? INTERVAL_US} µs; ${figures.scenarios.map((scenario) => `${scenario.name}: ours ${scenario.ours.responses}, the floor ${scenario.floor.responses} reviews`).join('; ')}; CPU µs per review under the profiler, which slows both: shares and differences):`,
    '',
    ...markdown(stageRows(figures)),
  ];
  for (const scenario of figures.scenarios) {
    lines.push('', `${scenario.name}, top self time of our code:`, '', ...markdown(topRows(scenario.ours.summary.ours.slice(0, 8), scenario.ours, 'function (source)')));
  }
  return lines.join('\n');
}
