/**
 * Runs the real-API-server tier (test/e2e/*.test.ts): one control plane per
 * Kubernetes version for the whole run, shared by every test file, stopped
 * by PID at the end whatever happens.
 *
 *   node --import tsx test/e2e/run.ts              missing binaries: one line naming KUBE_ASSETS, exit 1
 *   node --import tsx test/e2e/run.ts --optional   missing binaries: one "skipped: ..." line, exit 0 (npm test)
 *
 * Test files given as arguments run instead of all; other arguments go to
 * `node --test` (e.g. --test-name-pattern=...);
 * E2E_KUBE_VERSIONS=1.34 runs one version.
 */
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { ROOT } from '../helpers/fixtures.js';
import { selectedVersions, sharedAddressesEnv, startControlPlane, type OwnedControlPlane } from './control-plane.js';
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

const started = Date.now();
const versions = selectedVersions();
const planes: OwnedControlPlane[] = [];
let code = 1;
try {
  const results = await Promise.allSettled(versions.map((version) => startControlPlane(version)));
  for (const result of results) if (result.status === 'fulfilled') planes.push(result.value);
  const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed !== undefined) throw failed.reason;
  process.stdout.write(`control planes ready in ${((Date.now() - started) / 1000).toFixed(1)} s: ${planes.map((plane) => `${plane.version} at ${plane.server}`).join(', ')}\n`);
  const files = chosenFiles.length > 0 ? chosenFiles : readdirSync(join(ROOT, 'test', 'e2e'))
    .filter((name) => name.endsWith('.test.ts'))
    .sort()
    .map((name) => join('test', 'e2e', name));
  // One file at a time: the files share each cluster, and a chart's webhooks are cluster-wide.
  const child = spawn(process.execPath, ['--import', 'tsx', '--test', '--test-concurrency=1', ...testArgs, ...files], {
    cwd: ROOT,
    stdio: 'inherit',
    env: { ...process.env, ...sharedAddressesEnv(planes) },
  });
  const forward = (signal: NodeJS.Signals): void => void child.kill(signal);
  process.on('SIGINT', forward);
  process.on('SIGTERM', forward);
  code = await new Promise<number>((resolve) => child.once('exit', (exitCode, signal) => resolve(exitCode ?? (signal === null ? 1 : 128))));
} catch (error) {
  process.stderr.write(`real API server tests: ${(error as Error).message}\n`);
} finally {
  await Promise.all(planes.map((plane) => plane.stop()));
}
process.stdout.write(`real API server tests (Kubernetes ${versions.join(', ')}): ${code === 0 ? 'passed' : 'FAILED'} in ${((Date.now() - started) / 1000).toFixed(0)} s\n`);
process.exit(code);
