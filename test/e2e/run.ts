/**
 * Runs the real-API-server tier (test/e2e/*.test.ts): one control plane per
 * Kubernetes version for the whole run, shared by every test file of that
 * version, stopped by PID at the end whatever happens.
 *
 *   node --import tsx test/e2e/run.ts              missing binaries: one line naming KUBE_ASSETS, exit 1
 *   node --import tsx test/e2e/run.ts --optional   missing binaries: one "skipped: ..." line, exit 0 (npm test)
 *
 * Test files given as arguments run instead of all; other arguments go to
 * `node --test` (e.g. --test-name-pattern=...);
 * E2E_KUBE_VERSIONS=1.34 runs one version; E2E_PARALLEL=N runs at most N
 * versions at once (default: all of them).
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import { ROOT } from '../helpers/fixtures.js';
import { selectedVersions, sharedAddressesEnv, startControlPlane, type KubeVersion, type OwnedControlPlane } from './control-plane.js';
import { missingAssets } from './kube-binaries.js';

const args = process.argv.slice(2);
const optional = args.includes('--optional');
const testArgs = args.filter((arg) => arg !== '--optional' && !arg.endsWith('.test.ts'));
const chosenFiles = args.filter((arg) => arg.endsWith('.test.ts'));

const problem = missingAssets();
if (problem !== undefined) {
  if (optional) {
    process.stdout.write(`skipped: real API server tests (test/e2e): ${problem}\n`);
    process.exit(0);
  }
  process.stderr.write(`${problem}\n`);
  process.exit(1);
}

interface VersionRun {
  readonly version: KubeVersion;
  readonly code: number;
  readonly seconds: number;
  readonly passed: number;
  readonly failed: number;
}

const started = Date.now();
const versions = selectedVersions();
const parallel = Math.max(1, Number.parseInt(process.env['E2E_PARALLEL'] ?? '', 10) || versions.length);
const files = chosenFiles.length > 0 ? chosenFiles : readdirSync(join(ROOT, 'test', 'e2e'))
  .filter((name) => name.endsWith('.test.ts'))
  .sort()
  .map((name) => join('test', 'e2e', name));
const children = new Set<ReturnType<typeof spawn>>();
const forward = (signal: NodeJS.Signals): void => {
  for (const child of children) child.kill(signal);
};
process.on('SIGINT', forward);
process.on('SIGTERM', forward);

/**
 * Files that start a control plane of their own and mostly wait (watches of
 * a quiet cluster for minutes, budgets a controller computes): they run
 * beside the files that share the version's cluster, one at a time, so that
 * they add no time to the run.
 */
const OWN_CLUSTER_FILES = new Set(['quiet-watches.test.ts', 'disruption-budget.test.ts']);

/** `node --test` over FILES with ENV, one file at a time; resolves with its exit code and its whole output. */
async function runFiles(files: readonly string[], env: Record<string, string>): Promise<{ code: number; output: string }> {
  if (files.length === 0) return { code: 0, output: '' };
  const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', '--test-reporter=tap', ...testArgs, ...files], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...env },
  });
  children.add(child);
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const code = await new Promise<number>((resolve) => child.once('close', (exitCode, signal) => resolve(exitCode ?? (signal === null ? 1 : 128))));
  children.delete(child);
  return { code, output };
}

/**
 * One version: its control plane, then every file against it, one file at a
 * time (the files share the cluster, and a chart's webhooks are cluster-wide),
 * and beside them the files with a cluster of their own. Versions have
 * clusters of their own, so they run side by side; each one's output is
 * printed whole when it ends, so the reports do not interleave.
 */
async function runVersion(version: KubeVersion): Promise<VersionRun> {
  const begun = Date.now();
  let plane: OwnedControlPlane | undefined;
  let output = '';
  let code = 1;
  let passed = 0;
  let failed = 0;
  const count = (text: string, label: string): number => Number(new RegExp(`^# ${label} (\\d+)$`, 'm').exec(text)?.[1] ?? 0);
  try {
    const own = files.filter((file) => OWN_CLUSTER_FILES.has(basename(file)));
    const shared = files.filter((file) => !own.includes(file));
    if (shared.length > 0) {
      plane = await startControlPlane(version);
      output += `Kubernetes ${version}: control plane ready in ${((Date.now() - begun) / 1000).toFixed(1)} s at ${plane.server}\n`;
    }
    const runs = await Promise.all([
      plane === undefined ? runFiles([], {}) : runFiles(shared, { E2E_KUBE_VERSIONS: version, ...sharedAddressesEnv([plane]) }),
      runFiles(own, { E2E_KUBE_VERSIONS: version }),
    ]);
    for (const run of runs) {
      output += run.output;
      passed += count(run.output, 'pass');
      failed += count(run.output, 'fail');
    }
    code = runs.every((run) => run.code === 0) ? 0 : 1;
  } catch (error) {
    output += `real API server tests on Kubernetes ${version}: ${(error as Error).message}\n`;
  } finally {
    await plane?.stop();
  }
  const run: VersionRun = { version, code, seconds: (Date.now() - begun) / 1000, passed, failed };
  process.stdout.write(`${output}\nKubernetes ${version}: ${code === 0 ? 'passed' : 'FAILED'} in ${run.seconds.toFixed(0)} s (${run.passed} passed, ${run.failed} failed)\n\n`);
  return run;
}

const queue = [...versions];
const runs: VersionRun[] = [];
await Promise.all(Array.from({ length: Math.min(parallel, queue.length) }, async () => {
  for (let version = queue.shift(); version !== undefined; version = queue.shift()) runs.push(await runVersion(version));
}));
const code = runs.every((run) => run.code === 0) ? 0 : 1;
const passed = runs.reduce((sum, run) => sum + run.passed, 0);
const failed = runs.reduce((sum, run) => sum + run.failed, 0);
process.stdout.write(`real API server tests (Kubernetes ${versions.join(', ')}, ${Math.min(parallel, versions.length)} at once): ${code === 0 ? 'passed' : 'FAILED'} in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
process.stdout.write(`e2e: ${passed} passed, ${failed} failed\n`);
process.exit(code);
