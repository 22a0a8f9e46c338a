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
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { ClusterFigures, ColdStart, MemoryFlatness, ScenarioResult, ShippedSize } from './figures.js';
import { table } from './format.js';
import { clusterFigures, coldStart, memoryFlatness, shippedSize } from './footprint.js';
import { cleanUp, log, work } from './harness.js';
import { flags, ONLY, QUICK, selected, SETTINGS } from './options.js';
import { ROOT } from './processes.js';
import { clusterText, coldStartText, header, machineInfo, markdownSummary, memoryFlatnessText, scenarioTable, shippedText, updateReadme, type MachineInfo } from './report.js';
import { ALL_SCENARIOS, precomputeResponses, runScenario, SCENARIOS } from './scenarios.js';
import { COUNTED_SCENARIOS, instructionFigures, instructionsText, instructionsUnavailable, type InstructionCounts } from './instructions.js';
import { apiServerTargets, evaluateTargets, type Target } from './targets.js';
import { missingAssets } from '../test/e2e/kube-binaries.js';
import { scaleFigures, scaleTargets, scaleText, type ScaleFigures } from './cluster-scale.js';
import { apiServerFigures, apiServerMarkdown, apiServerText, type ApiServerFigures } from './cluster-latency.js';
import { profileFigures, profileMarkdown, profileText, type ProfileFigures } from './profile.js';

/** What one run measured: only the parts selected. */
interface Measured {
  readonly scenarios: readonly ScenarioResult[];
  readonly memory: MemoryFlatness | undefined;
  readonly cold: ColdStart | undefined;
  readonly cluster: ClusterFigures | undefined;
  readonly shipped: ShippedSize | undefined;
  readonly profile: ProfileFigures | undefined;
  /** Undefined when not selected; a string: why it was skipped. */
  readonly instructions: readonly InstructionCounts[] | string | undefined;
  readonly apiServer: ApiServerFigures | undefined;
  readonly scale: ScaleFigures | undefined;
}

async function measure(): Promise<Measured> {
  log('bench: precomputing the floor responses with our server');
  const counted = (name: string): boolean => selected('instructions') && (COUNTED_SCENARIOS as readonly string[]).includes(name);
  const responses = await precomputeResponses(ALL_SCENARIOS.filter((scenario) => selected(scenario.name) || counted(scenario.name)));
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
  const shipped = selected('size') ? shippedSize() : undefined;
  let profile: ProfileFigures | undefined;
  if (selected('profile')) {
    // Servers of its own, after the timed parts: the profiler slows what it samples.
    log(`bench: profile of ours, seed and skip, ${SETTINGS.profileSeconds} s each under the sampling profiler`);
    profile = await profileFigures();
  }
  let instructions: readonly InstructionCounts[] | string | undefined;
  if (selected('instructions')) {
    instructions = instructionsUnavailable();
    log(`bench: ${instructions ?? 'instructions per review, ours and the floor under callgrind, seed and skip'}`);
    instructions ??= await instructionFigures(responses);
  }
  // The real API server parts need the tier's binaries (test/e2e/kube-binaries.ts); without them they are skipped, saying why.
  const missing = selected('apiserver') || selected('scale') ? missingAssets() : undefined;
  if (missing !== undefined) log(`bench: skipping the real API server parts (apiserver, scale): ${missing}`);
  let apiServer: ApiServerFigures | undefined;
  if (selected('apiserver') && missing === undefined) {
    log(`bench: Pod CREATE through a real kube-apiserver ${SETTINGS.apiServer.kubeVersion}, five paths`);
    apiServer = await apiServerFigures(SETTINGS.apiServer);
  }
  let scale: ScaleFigures | undefined;
  if (selected('scale') && missing === undefined) {
    log(`bench: scale, ${SETTINGS.scale.namespaces} namespaces and ${SETTINGS.scale.pods} Pods on a real kube-apiserver ${SETTINGS.scale.kubeVersion}`);
    scale = await scaleFigures(SETTINGS.scale);
  }
  return { scenarios, memory, cold, cluster, shipped, profile, instructions, apiServer, scale };
}

/** The console report: the header, the scenario table and its note, the other parts, the targets. */
function consoleReport(startedAt: Date, machine: MachineInfo, { scenarios, memory, cold, cluster, shipped, profile, instructions, apiServer, scale }: Measured, targets: readonly Target[]): string {
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
  if (profile !== undefined) out.push('', ...profileText(profile));
  if (instructions !== undefined) out.push('', ...(typeof instructions === 'string' ? [instructions] : instructionsText(instructions)));
  if (apiServer !== undefined) out.push('', ...apiServerText(apiServer));
  if (scale !== undefined) out.push('', ...scaleText(scale));
  out.push('', table([['target', 'value', 'limit', ''], ...targets.map((target) => [target.name, target.value, target.limit, target.pass ? 'PASS' : 'FAIL'])]), '');
  return `${out.join('\n')}\n`;
}

/** The results file (a dated one; a quick or partial run's ignored), and for a full run latest.json and the README block. */
function writeResults(startedAt: Date, machine: MachineInfo, measured: Measured, targets: readonly Target[]): void {
  const { scenarios, memory, cold, cluster, shipped, profile, instructions, apiServer, scale } = measured;
  const results = { date: startedAt.toISOString(), quick: QUICK, only: ONLY ?? null, machine, settings: SETTINGS, scenarios, memory: memory ?? null, coldStart: cold ?? null, cluster: cluster ?? null, shippedSize: shipped ?? null, profile: profile ?? null, instructions: instructions ?? null, apiServer: apiServer ?? null, scale: scale ?? null, targets };
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
    updateReadme([markdownSummary(startedAt, machine, scenarios, memory, cold, cluster, shipped, targets), ...(profile === undefined ? [] : ['', profileMarkdown(profile)]), ...(instructions === undefined ? [] : ['', ...(typeof instructions === 'string' ? [instructions] : instructionsText(instructions)).map((line) => `- ${line}.`)]), ...(apiServer === undefined ? [] : ['', apiServerMarkdown(apiServer)]), ...(scale === undefined ? [] : ['', ...scaleText(scale).map((line) => `- ${line}.`)])].join('\n'));
  }
  log(`bench: results in bench/results/${name}${complete ? ', bench/results/latest.json and the table in bench/README.md' : ''}`);
}

async function main(): Promise<void> {
  const startedAt = new Date();
  log(`bench: work dir ${work}`);
  const measured = await measure();
  const targets = [...evaluateTargets(measured.scenarios, measured.memory, measured.cold, measured.cluster), ...(measured.apiServer === undefined ? [] : apiServerTargets(measured.apiServer)), ...(measured.scale === undefined ? [] : scaleTargets(measured.scale))];
  const machine = machineInfo();
  process.stdout.write(consoleReport(startedAt, machine, measured, targets));
  if (!flags['no-write']) writeResults(startedAt, machine, measured, targets);
}

try {
  await main();
} finally {
  cleanUp();
}
