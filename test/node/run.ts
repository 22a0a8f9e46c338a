/**
 * Runs the node tier (test/node/*.test.ts): per Kubernetes version with a
 * kubelet (1.36, then 1.34: one kubelet per machine), one node (node.ts) for
 * every file of that version, stopped and the host restored whatever happens.
 *
 *   node --import tsx test/node/run.ts              missing prerequisites: one line, exit 1
 *   node --import tsx test/node/run.ts --optional   missing prerequisites: one "skipped: ..." line, exit 0 (npm test);
 *                                                   under CI=true they fail the run all the same
 *
 * Test files given as arguments run instead of all; other arguments go to
 * `node --test`; E2E_KUBE_VERSIONS=1.34 runs one version.
 */
import { spawn } from 'node:child_process';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers/fixtures.js';
import { withLock } from '../helpers/lock.js';
import { sharedAddressesEnv } from '../e2e/control-plane.js';
import { kubeAssetsDir, missingAssets, type KubeVersion } from '../e2e/kube-binaries.js';
import { nodeVersions } from './node-suite.js';
import { startNode, type KubeNode } from './node.js';

const args = process.argv.slice(2);
const optional = args.includes('--optional');
const testArgs = args.filter((arg) => arg !== '--optional' && !arg.endsWith('.test.ts'));
const chosenFiles = args.filter((arg) => arg.endsWith('.test.ts'));

/** Why this machine cannot run the tier, in one line; undefined when it can. */
function missingPrerequisite(): string | undefined {
  if (process.getuid?.() !== 0) return 'not root (a kubelet and containerd need root)';
  const problem = missingAssets();
  if (problem !== undefined) return problem;
  const assets = kubeAssetsDir() ?? '';
  for (const file of ['crictl.xz', ...nodeVersions().map((version) => `${version}/kubelet.xz`)]) {
    if (!existsSync(join(assets, file))) return `KUBE_ASSETS=${assets}: ${file} is missing`;
  }
  for (const [tool, from] of [['containerd', 'containerd'], ['runc', 'runc'], ['ctr', 'containerd'], ['apt-get', 'apt'], ['dpkg-deb', 'dpkg']] as const) {
    if (!(process.env['PATH'] ?? '').split(':').some((dir) => existsSync(join(dir, tool)))) return `${tool} is not installed (Debian sid's ${from}: see .ci/run)`;
  }
  if (!existsSync('/usr/lib/cni/bridge')) return 'the CNI plugins are not installed (/usr/lib/cni/bridge: Debian sid\'s containernetworking-plugins, see .ci/run)';
  return undefined;
}

const problem = missingPrerequisite();
if (problem !== undefined) {
  if (optional && process.env['CI'] !== 'true') {
    process.stdout.write(`skipped: node tier (test/node): ${problem}\n`);
    process.exit(0);
  }
  process.stderr.write(`node tier (test/node): ${problem}\n`);
  process.exit(1);
}

const files = chosenFiles.length > 0 ? chosenFiles : readdirSync(join(ROOT, 'test', 'node'))
  .filter((name) => name.endsWith('.test.ts'))
  .sort()
  .map((name) => join('test', 'node', name));
let child: ReturnType<typeof spawn> | undefined;
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child?.kill(signal));

const started = Date.now();
let passed = 0;
let failed = 0;
let code = 0;
/**
 * Runs one version's files on its own node, and restores the host; the exit
 * code of `node --test` (1 when the node could not be made).
 */
async function runVersion(version: KubeVersion): Promise<number> {
  let node: KubeNode | undefined;
  let versionCode = 1;
  const begun = Date.now();
  try {
    node = await startNode(version);
    process.stdout.write(`Kubernetes ${version}: node ready in ${((Date.now() - begun) / 1000).toFixed(1)} s (${Object.entries(node.timings).map(([step, seconds]) => `${step} ${seconds} s`).join(', ')})\n`);
    let output = '';
    const running = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', '--test-reporter=spec', ...testArgs, ...files], {
      cwd: ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, E2E_KUBE_VERSIONS: version, ...sharedAddressesEnv([node.plane]) },
    });
    child = running;
    running.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      output += chunk;
      process.stdout.write(chunk);
    });
    running.stderr.setEncoding('utf8').on('data', (chunk: string) => process.stderr.write(chunk));
    versionCode = await new Promise<number>((resolve) => running.once('close', (exitCode, signal) => resolve(exitCode ?? (signal === null ? 1 : 128))));
    passed += Number(/^ℹ pass (\d+)$/m.exec(output)?.[1] ?? 0);
    failed += Number(/^ℹ fail (\d+)$/m.exec(output)?.[1] ?? 0);
  } catch (error) {
    process.stdout.write(`node tier on Kubernetes ${version}: ${(error as Error).stack ?? String(error)}\n`);
    failed += 1;
  } finally {
    await node?.stop().catch((error: unknown) => {
      process.stdout.write(`node tier on Kubernetes ${version}: restoring the host failed: ${(error as Error).message}\n`);
      versionCode = 1;
    });
  }
  return versionCode;
}

// One kubelet per machine: a second run (another worktree's) waits for this one.
const kubeletLockWaitMs = 45 * 60_000;
for (const version of nodeVersions()) {
  const begun = Date.now();
  const versionCode = await withLock('node-tier-kubelet', () => runVersion(version), { waitMs: kubeletLockWaitMs, staleMs: kubeletLockWaitMs });
  if (versionCode !== 0) code = 1;
  process.stdout.write(`Kubernetes ${version}: node tier ${versionCode === 0 ? 'passed' : 'FAILED'} in ${((Date.now() - begun) / 1000).toFixed(0)} s\n\n`);
}
process.stdout.write(`node tier (Kubernetes ${nodeVersions().join(', ')}, one after the other): ${code === 0 ? 'passed' : 'FAILED'} in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
process.stdout.write(`node: ${passed} passed, ${failed} failed\n`);
process.exit(code);
