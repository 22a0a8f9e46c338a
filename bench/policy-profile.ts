/**
 * A diagnostic, not part of `npm run bench`: where kube-apiserver spends its
 * CPU on a Pod CREATE through our policy and through the constant policy
 * (bench/constant-policy.ts), from its own CPU profile (`--profiling=true`,
 * `/debug/pprof/profile`), per stage of the mutating policy plugin, in µs per
 * Pod. Issue 39 found with it that our extra cost was CEL programs (cel-go
 * plans each variable and match condition and gives it a cost tracker per
 * run), comprehensions and the lazy map of every variable.
 *
 * Pods are created with dryRun=All, one client: admission runs in full and
 * nothing is stored, so the API server's heap, and the garbage collector's
 * work with it, does not grow from one profile to the next. The two cases
 * alternate, ROUNDS profiles of SECONDS each.
 *
 *   KUBE_ASSETS=<folder> node --import tsx bench/policy-profile.ts [--kube-version 1.34|1.36] [--seconds 8] [--rounds 4]
 */
import { Agent, request } from 'node:https';
import { parseArgs } from 'node:util';
import { bindConstantLike, bindPolicy, compiledOurs, dryRunPod, type InjectedPod } from './constant-policy.js';
import { createNamespace } from '../test/e2e/cluster.js';
import { servedPolicyApiVersion, startControlPlane } from '../test/e2e/control-plane.js';
import { exitWithoutAssets } from '../test/e2e/kube-binaries.js';
import { table } from './format.js';
import { seedPodBody, type ApiAccess } from './pod-load.js';
import { readCpuProfile, type ProfileSample } from './pprof.js';

const { values } = parseArgs({ options: { 'kube-version': { type: 'string', default: '1.36' }, seconds: { type: 'string', default: '8' }, rounds: { type: 'string', default: '4' } } });
const version = values['kube-version'] === '1.34' ? '1.34' : '1.36';
const [seconds, rounds] = [Number(values.seconds), Number(values.rounds)];
exitWithoutAssets();

/** The stages, each the samples with a matching function on their stack (inclusive time). */
const STAGES: readonly [string, RegExp | undefined][] = [
  ['the whole API server', undefined],
  ['the mutating policy plugin', /plugin\/policy\/mutating\.\(\*Plugin\)\.Admit$/],
  ['  its match conditions', /matchconditions\.\(\*matcher\)\.Match$/],
  ['  its patch (activation, CEL, JSON)', /patch\.\(\*jsonPatcher\)\.evaluatePatchExpression$/],
  ['CEL programs run', /cel-go\/cel\.\(\*prog\)\.Eval$/],
  ['  variables evaluated', /plugin\/cel\.\(\*variableAccessor\)\.Callback$/],
  ['  planning per run (OptTrackCost)', /cel-go\/cel\.newProgram\.func1$/],
  ['  cost trackers', /interpreter\.NewCostTracker$/],
  ['  comprehensions', /interpreter\.\(\*evalFold\)\.Eval$/],
  ['the lazy map of all variables', /plugin\/cel\.\(\*compositionContext\)\.Variables$/],
  ['objects to unstructured', /plugin\/cel\.convertObjectToUnstructured$/],
  ['garbage collection', /runtime\.gcBgMarkWorker$/],
];

const CASES = ['constant policy', 'ours'] as const;
type Case = (typeof CASES)[number];
const NAMESPACES: Record<Case, string> = { 'constant policy': 'profile-constant', ours: 'profile-ours' };

const plane = await startControlPlane(version, { apiServerArgs: ['--profiling=true'] });
const agent = new Agent({ keepAlive: true, maxSockets: 4 });
try {
  const group = `admissionregistration.k8s.io/${servedPolicyApiVersion(version) ?? 'v1'}`;
  for (const name of Object.values(NAMESPACES)) await createNamespace(plane, name, { 'envoy-injector.io/inject': 'enabled' });
  const seed = seedPodBody();
  await bindPolicy(plane, agent, group, compiledOurs(NAMESPACES.ours), NAMESPACES.ours);
  await bindConstantLike(plane, agent, group, { ours: NAMESPACES.ours, constant: NAMESPACES['constant policy'] }, NAMESPACES['constant policy'], seed);
  const dryRun = (namespace: string): Promise<InjectedPod> => dryRunPod(plane, agent, namespace, seed);

  const samples: Record<Case, ProfileSample[][]> = { 'constant policy': [], ours: [] };
  const pods: Record<Case, number[]> = { 'constant policy': [], ours: [] };
  for (const name of CASES) for (let warm = 0; warm < 200; warm++) await dryRun(NAMESPACES[name]);
  for (let round = 0; round < rounds; round++) {
    for (const name of round % 2 === 0 ? CASES : [...CASES].reverse()) {
      let stop = false;
      let created = 0;
      const load = (async () => {
        while (!stop) {
          await dryRun(NAMESPACES[name]);
          created += 1;
        }
      })();
      const profile = await cpuProfile(plane, seconds);
      stop = true;
      await load;
      samples[name].push(readCpuProfile(profile));
      pods[name].push(created);
    }
  }
  const perPod = (name: Case, stage: RegExp | undefined): number =>
    samples[name].reduce((sum, round, index) => sum + round.filter((sample) => stage === undefined || sample.stack.some((fn) => stage.test(fn))).reduce((total, sample) => total + sample.nanoseconds, 0) / 1000 / (pods[name][index] ?? 1), 0) / rounds;
  process.stdout.write(`kube-apiserver ${version}, its CPU profile over ${rounds} alternating rounds of ${seconds} s per case (${pods.ours.reduce((a, b) => a + b, 0)} and ${pods['constant policy'].reduce((a, b) => a + b, 0)} dry-run Pods), µs per Pod:\n`);
  process.stdout.write(
    `${table([
      ['stage (inclusive)', 'constant policy', 'ours', 'ours - constant', 'ours / constant'],
      ...STAGES.map(([title, stage]) => {
        const [constant, mine] = [perPod('constant policy', stage), perPod('ours', stage)];
        return [title, constant.toFixed(0), mine.toFixed(0), `${mine >= constant ? '+' : ''}${(mine - constant).toFixed(0)}`, constant >= 1 ? `${(mine / constant).toFixed(2)}×` : ''];
      }),
    ])}\n`,
  );
} finally {
  agent.destroy();
  await plane.stop();
}

/** SECONDS of the API server's CPU profile, gzipped profile.proto. */
function cpuProfile(access: ApiAccess, seconds: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const req = request(`${access.server}/debug/pprof/profile?seconds=${seconds}`, { ca: access.ca, headers: { authorization: `Bearer ${access.adminToken}` }, timeout: (seconds + 60) * 1000 }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => (response.statusCode === 200 ? resolve(Buffer.concat(chunks)) : reject(new Error(`/debug/pprof/profile: ${response.statusCode}: ${Buffer.concat(chunks).toString().slice(0, 200)}`))));
      response.on('error', reject);
    });
    req.once('timeout', () => req.destroy(new Error('/debug/pprof/profile: no answer')));
    req.once('error', reject);
    req.end();
  });
}
