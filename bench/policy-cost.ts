/**
 * A diagnostic, not part of `npm run bench`: what a MutatingAdmissionPolicy
 * costs the API server per Pod, to tell the price of any policy from the part
 * that is ours (bench/FINDINGS.md, issue 27). One real kube-apiserver
 * (with its controller manager), one namespace per case, Pods created one at a
 * time in alternating rounds:
 *
 * - none: the seed's Pod, no policy binds the namespace;
 * - injected shape: the Pod as our policy stores it (less the token mount the
 *   ServiceAccount plugin adds), created as such: the price of its size alone;
 * - constant policy: the seed's Pod, a policy whose JSONPatch adds that very
 *   content as CEL literals (our matchConstraints and IfNeeded, as ours, and
 *   a `not-injected` condition of its own, constant-policy.ts):
 *   the price of any policy injecting this sidecar;
 * - ours: the seed's Pod, our compiled policy (compilePolicy, as the policy
 *   controller applies it) bound to its namespace.
 *
 *   KUBE_ASSETS=<folder> node --import tsx bench/policy-cost.ts [--kube-version 1.34|1.36] [--pods N] [--rounds N]
 */
import { Agent } from 'node:https';
import { parseArgs } from 'node:util';
import { bindConstantLike, bindPolicy, compiledOurs, injectedShape } from './constant-policy.js';
import { createNamespace } from '../test/e2e/cluster.js';
import { servedPolicyApiVersion, startControlPlane } from '../test/e2e/control-plane.js';
import { exitWithoutAssets } from '../test/e2e/kube-binaries.js';
import { fmt, table } from './format.js';
import { apiCall, createPods, percentile, seedPodBody } from './pod-load.js';
import { readCpuSeconds } from './processes.js';

const { values } = parseArgs({ options: { 'kube-version': { type: 'string', default: '1.34' }, pods: { type: 'string', default: '600' }, rounds: { type: 'string', default: '6' } } });
const version = values['kube-version'] === '1.36' ? '1.36' : '1.34';
const [podsPerCase, rounds] = [Number(values.pods), Number(values.rounds)];
exitWithoutAssets();

const CASES = ['none', 'injected shape', 'constant policy', 'ours'] as const;
type Case = (typeof CASES)[number];
const NAMESPACES: Record<Case, string> = { none: 'cost-none', 'injected shape': 'cost-shape', 'constant policy': 'cost-constant', ours: 'cost-ours' };

const plane = await startControlPlane(version, { controllerManagerArgs: ['--kube-api-qps=2000', '--kube-api-burst=2000'] });
const agent = new Agent({ keepAlive: true, maxSockets: 4 });
try {
  const group = `admissionregistration.k8s.io/${servedPolicyApiVersion(version) ?? 'v1'}`;
  // The injected namespace label on every case: only the bindings differ.
  for (const name of Object.values(NAMESPACES)) await createNamespace(plane, name, { 'envoy-injector.io/inject': 'enabled' });

  const seed = seedPodBody();
  await bindPolicy(plane, agent, group, compiledOurs(NAMESPACES.ours), NAMESPACES.ours);
  const stored = await bindConstantLike(plane, agent, group, { ours: NAMESPACES.ours, constant: NAMESPACES['constant policy'] }, NAMESPACES['constant policy'], seed);
  const bodies: Record<Case, Record<string, unknown>> = { none: seed, 'injected shape': injectedShape(stored, seed).shape, 'constant policy': seed, ours: seed };

  const apiServerPid = plane.processes.find((managed) => managed.name === 'kube-apiserver')?.child.pid;
  if (apiServerPid === undefined) throw new Error('no kube-apiserver process');
  const latencies = Object.fromEntries(CASES.map((name) => [name, [] as number[]])) as Record<Case, number[]>;
  const cpuSeconds = Object.fromEntries(CASES.map((name) => [name, 0])) as Record<Case, number>;
  const plugin = Object.fromEntries(CASES.map((name) => [name, { seconds: 0, calls: 0 }])) as Record<Case, PluginTime>;
  const pluginTime = async (): Promise<PluginTime> => mutatingPolicyPluginTime((await apiCall(plane, agent, 'GET', '/metrics')).body);
  for (const name of CASES) await createPods(plane, NAMESPACES[name], bodies[name], 30, 1);
  const perRound = Math.max(1, Math.round(podsPerCase / rounds));
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 === 0 ? CASES : [...CASES].reverse()) {
      const pluginBefore = await pluginTime();
      const before = readCpuSeconds(apiServerPid);
      const run = await createPods(plane, NAMESPACES[name], bodies[name], perRound, 1);
      if (run.refused.length > 0) throw new Error(`${name}: ${run.refused[0]}`);
      cpuSeconds[name] += readCpuSeconds(apiServerPid) - before;
      const pluginAfter = await pluginTime();
      plugin[name].seconds += pluginAfter.seconds - pluginBefore.seconds;
      plugin[name].calls += pluginAfter.calls - pluginBefore.calls;
      latencies[name].push(...run.latenciesMs);
    }
  }
  const p50 = (name: Case): number => percentile([...latencies[name]].sort((a, b) => a - b), 50);
  const cpuMs = (name: Case): number => (1000 * cpuSeconds[name]) / latencies[name].length;
  process.stdout.write(`kube-apiserver ${version}, ${perRound * rounds} Pods per case in ${rounds} alternating rounds, one client:\n`);
  process.stdout.write(
    `${table([
      ['case', 'p50 ms', 'p50 / none', 'kube-apiserver CPU ms per Pod', 'vs none', 'policy plugin µs per Pod', 'its calls per Pod'],
      ...CASES.map((name) => [
        name,
        fmt.ms(p50(name)),
        fmt.ratio(p50(name) / p50('none')),
        cpuMs(name).toFixed(2),
        `+${(cpuMs(name) - cpuMs('none')).toFixed(2)}`,
        ((1e6 * plugin[name].seconds) / latencies[name].length).toFixed(0),
        (plugin[name].calls / latencies[name].length).toFixed(2),
      ]),
    ])}\n`,
  );
} finally {
  agent.destroy();
  await plane.stop();
}

interface PluginTime {
  seconds: number;
  calls: number;
}

/**
 * The MutatingAdmissionPolicy admission plugin's time (the sum of
 * `apiserver_admission_controller_admission_duration_seconds`, every
 * invocation of the plugin, reinvocations included) and its calls, from the
 * API server's metrics: the wall time the policies took, matching and
 * bindings included, without the rest of the request.
 */
function mutatingPolicyPluginTime(metrics: string): PluginTime {
  const total = (suffix: '_sum' | '_count'): number =>
    metrics
      .split('\n')
      .filter((line) => line.startsWith(`apiserver_admission_controller_admission_duration_seconds${suffix}{`) && line.includes('name="MutatingAdmissionPolicy"') && line.includes('type="admit"'))
      .reduce((sum, line) => sum + Number(line.slice(line.lastIndexOf(' ') + 1)), 0);
  return { seconds: total('_sum'), calls: total('_count') };
}
