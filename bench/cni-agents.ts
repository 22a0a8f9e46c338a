/**
 * Many CNI node agents against one real kube-apiserver (issue 50): N agent
 * processes, one per simulated node (each its own node name, CNI folders and
 * socket; no kubelet, no real CNI: the agents need only the API), as the
 * chart's ServiceAccount and ClusterRole would run them. Measured:
 *
 * - at rest: the API server's requests per second (`apiserver_request_total`
 *   over a window, by verb and resource) and its CPU (`/proc`), first with
 *   no agent (the floor), then with the N agents, the difference per agent
 *   and scaled to 1,000 nodes;
 * - during an API outage (kube-apiserver stopped with SIGSTOP: a hung API
 *   server, connections open and unanswered): per agent, an ADD as the shim
 *   sends it for a Pod of its node it has seen, one for a kube-system Pod
 *   (CoreDNS, never captured) and one for a Pod of an ordinary namespace it
 *   has never seen; how many were answered "go" (the Pod starts), and how
 *   many "try again later" (the kubelet retries).
 *
 * `--agent-root DIR` runs the agents of another checkout's build (its
 * `bin/envoy-injector.js`): the before figures come from the commit before
 * the watch, built there. Prints a Markdown table and a JSON line.
 *
 *   node --import tsx bench/cni-agents.ts [--agents 60] [--pods-per-node 10]
 *     [--rest-seconds 60] [--kube-version 1.36] [--agent-root DIR] [--label after]
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { getMetrics } from '../test/e2e/apiserver-metrics.js';
import { startControlPlane, type KubeVersion, type OwnedControlPlane } from '../test/e2e/control-plane.js';
import { kubeCall } from '../test/e2e/policy-parity.js';
import { readCpuSeconds, ROOT } from './processes.js';

const APPS = 'bench-apps';
const SYSTEM = 'bench-cni';
const NODES = 1_000;

interface Settings {
  readonly agents: number;
  readonly podsPerNode: number;
  readonly restSeconds: number;
  readonly version: KubeVersion;
  readonly agentRoot: string;
  readonly label: string;
}

function settingsOf(argv: readonly string[]): Settings {
  const { values } = parseArgs({
    args: [...argv],
    options: {
      agents: { type: 'string', default: '60' },
      'pods-per-node': { type: 'string', default: '10' },
      'rest-seconds': { type: 'string', default: '60' },
      'kube-version': { type: 'string', default: '1.36' },
      'agent-root': { type: 'string', default: ROOT },
      label: { type: 'string', default: 'after' },
    },
    strict: true,
  });
  const count = (name: string, text: string, max: number): number => {
    const value = Number(text);
    if (!Number.isInteger(value) || value < 1 || value > max) throw new Error(`--${name}: an integer from 1 to ${max}, not ${text}`);
    return value;
  };
  const version = values['kube-version'];
  if (!['1.28', '1.34', '1.36'].includes(version)) throw new Error(`--kube-version: 1.28, 1.34 or 1.36, not ${version}`);
  if (!existsSync(join(values['agent-root'], 'dist', 'bundle', 'main.js'))) throw new Error(`--agent-root ${values['agent-root']}: no dist/bundle/main.js (npm run build there first)`);
  return { agents: count('agents', values.agents, 500), podsPerNode: count('pods-per-node', values['pods-per-node'], 110), restSeconds: count('rest-seconds', values['rest-seconds'], 3_600), version: version as KubeVersion, agentRoot: values['agent-root'], label: values.label };
}

const log = (line: string): void => void process.stderr.write(`${line}\n`);
const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** `apiserver_request_total` summed by "VERB resource" (non-resource requests as "VERB -"). */
async function requestCounts(plane: OwnedControlPlane): Promise<Map<string, number>> {
  const counts = new Map<string, number>();
  for (const line of (await getMetrics(plane)).split('\n')) {
    const match = /^apiserver_request_total\{([^}]*)\} (\S+)$/.exec(line);
    if (match === null) continue;
    const labels = match[1] ?? '';
    const verb = /(?:^|,)verb="([^"]*)"/.exec(labels)?.[1] ?? '?';
    const resource = /(?:^|,)resource="([^"]*)"/.exec(labels)?.[1] || '-';
    const key = `${verb} ${resource}`;
    counts.set(key, (counts.get(key) ?? 0) + Number(match[2]));
  }
  return counts;
}

interface RestFigures {
  readonly seconds: number;
  /** Requests per second by "VERB resource", those that moved. */
  readonly perSecond: Record<string, number>;
  readonly totalPerSecond: number;
  /** The API server's CPU over the window, in cores. */
  readonly apiServerCores: number;
}

/** The API server at rest for SECONDS: its requests and CPU. */
async function atRest(plane: OwnedControlPlane, pid: number, seconds: number): Promise<RestFigures> {
  const before = await requestCounts(plane);
  const cpuBefore = readCpuSeconds(pid);
  const startedAt = Date.now();
  await sleep(seconds * 1000);
  const cpuAfter = readCpuSeconds(pid);
  const elapsed = (Date.now() - startedAt) / 1000;
  const after = await requestCounts(plane);
  const perSecond: Record<string, number> = {};
  let total = 0;
  for (const [key, count] of after) {
    const delta = count - (before.get(key) ?? 0);
    if (delta <= 0) continue;
    perSecond[key] = delta / elapsed;
    total += delta;
  }
  return { seconds: elapsed, perSecond, totalPerSecond: total / elapsed, apiServerCores: (cpuAfter - cpuBefore) / elapsed };
}

/** The agent's ServiceAccount with the chart's ClusterRole for it (Pods get/list/watch/delete, Events create); its kubeconfig. */
async function agentAccount(plane: OwnedControlPlane): Promise<string> {
  const must = async (method: string, path: string, body: unknown): Promise<void> => {
    const answer = await kubeCall(plane, method, path, body);
    if (answer.status >= 300) throw new Error(`${method} ${path}: ${answer.status} ${JSON.stringify(answer.body)}`);
  };
  for (const name of [APPS, SYSTEM]) await must('POST', '/api/v1/namespaces', { apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
  await must('POST', `/api/v1/namespaces/${SYSTEM}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'cni-agent' } });
  // No controller manager (it would add its own requests): the Pods' ServiceAccount made here.
  await must('POST', `/api/v1/namespaces/${APPS}/serviceaccounts`, { apiVersion: 'v1', kind: 'ServiceAccount', metadata: { name: 'default' } });
  await must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterroles', {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRole',
    metadata: { name: 'bench-cni-agent' },
    rules: [
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'delete'] },
      { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create'] },
    ],
  });
  await must('POST', '/apis/rbac.authorization.k8s.io/v1/clusterrolebindings', {
    apiVersion: 'rbac.authorization.k8s.io/v1',
    kind: 'ClusterRoleBinding',
    metadata: { name: 'bench-cni-agent' },
    roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'bench-cni-agent' },
    subjects: [{ kind: 'ServiceAccount', name: 'cni-agent', namespace: SYSTEM }],
  });
  return plane.serviceAccountKubeconfig(SYSTEM, 'cni-agent');
}

const nodeName = (index: number): string => `bench-node-${index}`;

/** PODSPERNODE plain Pods bound to each node (no kubelet: they stay Pending, as the agents need only their objects). */
async function createPods(plane: OwnedControlPlane, settings: Settings): Promise<void> {
  const names: [number, number][] = [];
  for (let node = 0; node < settings.agents; node += 1) for (let pod = 0; pod < settings.podsPerNode; pod += 1) names.push([node, pod]);
  const worker = async (): Promise<void> => {
    for (let next = names.shift(); next !== undefined; next = names.shift()) {
      const [node, pod] = next;
      const body = { apiVersion: 'v1', kind: 'Pod', metadata: { name: `app-${node}-${pod}` }, spec: { nodeName: nodeName(node), automountServiceAccountToken: false, containers: [{ name: 'app', image: 'registry.example/app:1' }] } };
      const answer = await kubeCall(plane, 'POST', `/api/v1/namespaces/${APPS}/pods`, body);
      if (answer.status !== 201) throw new Error(`Pod app-${node}-${pod}: ${answer.status} ${JSON.stringify(answer.body)}`);
    }
  };
  await Promise.all(Array.from({ length: 8 }, worker));
}

interface Agent {
  readonly index: number;
  readonly dir: string;
  readonly child: ChildProcess;
}

/** One agent process for node INDEX, in folders of its own under WORK; resolves once it is ready (the plugin in place). */
async function startAgent(work: string, index: number, kubeconfig: string, settings: Settings): Promise<Agent> {
  const dir = join(work, `agent-${index}`);
  for (const folder of ['bin', 'net.d']) await mkdir(join(dir, folder), { recursive: true });
  await writeFile(join(dir, 'shim'), 'not run here\n');
  await writeFile(join(dir, 'net.d', '10-bench.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: 'bench', plugins: [{ type: 'bridge' }] }));
  const args = [
    join(settings.agentRoot, 'bin', 'envoy-injector.js'), 'cni-agent', '--node-name', nodeName(index), '--kubeconfig', kubeconfig,
    '--cni-bin-dir', join(dir, 'bin'), '--cni-conf-dir', join(dir, 'net.d'), '--socket', join(dir, 'cni.sock'), '--plugin', join(dir, 'shim'),
    '--rules', '/bin/true', '--ready-file', join(dir, 'ready'), '--metrics-port', '0',
  ];
  const child = spawn(process.execPath, args, { stdio: ['ignore', 'ignore', 'ignore'], env: { ...process.env, POD_NAMESPACE: SYSTEM } });
  for (let waited = 0; !existsSync(join(dir, 'ready')); waited += 100) {
    if (child.exitCode !== null) throw new Error(`agent ${index} exited ${child.exitCode}`);
    if (waited > 60_000) throw new Error(`agent ${index} not ready within 60 s`);
    await sleep(100);
  }
  return { index, dir, child };
}

/** One ADD as the shim sends it, for Pod NAMESPACE/NAME: 'go', 'again' (CNI error 11) or 'other', within 12 s (the shim's 10 s, and some). */
function shimAdd(agent: Agent, namespace: string, name: string): Promise<'go' | 'again' | 'other'> {
  const config = JSON.stringify({ cniVersion: '1.0.0', name: 'bench', type: 'envoy-injector-cni', prevResult: { cniVersion: '1.0.0', ips: [{ address: '198.51.100.7/24' }] } });
  const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_NETNS: '/var/run/netns/none', CNI_IFNAME: 'eth0', CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name}` };
  return new Promise((resolve) => {
    const connection = createConnection(join(agent.dir, 'cni.sock'));
    let text = '';
    const timer = setTimeout(() => connection.destroy(), 12_000);
    connection.on('data', (chunk: Buffer) => (text += chunk.toString()));
    connection.on('close', () => {
      clearTimeout(timer);
      resolve(text.startsWith('0\n') ? 'go' : /"code":11/.test(text) ? 'again' : 'other');
    });
    connection.on('error', () => undefined);
    connection.end(`${Object.entries(env).map(([key, value]) => `${key}=${value}`).join('\n')}\n\n${config}`);
  });
}

type OutageKind = 'seen' | 'kubeSystem' | 'unseen';
type OutageFigures = Record<OutageKind, { go: number; again: number; other: number }>;

/** kube-apiserver stopped (SIGSTOP): each agent asked for three Pods at once; then SIGCONT. */
async function duringOutage(agents: readonly Agent[], apiServerPid: number): Promise<OutageFigures> {
  const figures: OutageFigures = { seen: { go: 0, again: 0, other: 0 }, kubeSystem: { go: 0, again: 0, other: 0 }, unseen: { go: 0, again: 0, other: 0 } };
  process.kill(apiServerPid, 'SIGSTOP');
  try {
    await Promise.all(
      agents.flatMap((agent) => {
        const asks: [OutageKind, string, string][] = [['seen', APPS, `app-${agent.index}-0`], ['kubeSystem', 'kube-system', `coredns-${agent.index}`], ['unseen', APPS, `new-${agent.index}`]];
        return asks.map(async ([kind, namespace, name]) => void (figures[kind][await shimAdd(agent, namespace, name)] += 1));
      }),
    );
  } finally {
    process.kill(apiServerPid, 'SIGCONT');
  }
  return figures;
}

async function stopAgents(agents: readonly Agent[]): Promise<void> {
  await Promise.all(
    agents.map(
      (agent) =>
        new Promise<void>((resolve) => {
          if (agent.child.exitCode !== null) return resolve();
          const kill = setTimeout(() => agent.child.kill('SIGKILL'), 10_000);
          agent.child.once('exit', () => {
            clearTimeout(kill);
            resolve();
          });
          agent.child.kill('SIGTERM');
        }),
    ),
  );
}

/**
 * What the agents ask, per second: Pods and Events, and the non-resource GETs
 * (`/version`, the watch's liveness check) beyond the floor's; not the API
 * server's own informers, whose watches end now and then whoever is there.
 */
function agentRequests(floor: RestFigures, loaded: RestFigures): number {
  let total = 0;
  for (const [key, rate] of Object.entries(loaded.perSecond)) {
    if (/ (pods|events)$/.test(key)) total += rate - (floor.perSecond[key] ?? 0);
    else if (key === 'GET -') total += Math.max(0, rate - (floor.perSecond[key] ?? 0));
  }
  return total;
}

function report(settings: Settings, floor: RestFigures, loaded: RestFigures, outage: OutageFigures): void {
  const perAgent = agentRequests(floor, loaded) / settings.agents;
  const coresPerAgent = (loaded.apiServerCores - floor.apiServerCores) / settings.agents;
  const keys = [...new Set([...Object.keys(floor.perSecond), ...Object.keys(loaded.perSecond)])].sort();
  const rows = keys.map((key) => `| ${key} | ${(floor.perSecond[key] ?? 0).toFixed(3)} | ${(loaded.perSecond[key] ?? 0).toFixed(3)} |`);
  const line = (kind: OutageKind): string => `${outage[kind].go} go, ${outage[kind].again} try again, ${outage[kind].other} other`;
  process.stdout.write(
    [
      `## CNI agents (${settings.label}): ${settings.agents} agents, ${settings.podsPerNode} Pods each, Kubernetes ${settings.version}, ${Math.round(loaded.seconds)} s at rest`,
      '',
      '| requests/s by verb and resource | no agent | with the agents |',
      '|---|--:|--:|',
      ...rows,
      `| all | ${floor.totalPerSecond.toFixed(3)} | ${loaded.totalPerSecond.toFixed(3)} |`,
      `| kube-apiserver CPU, cores | ${floor.apiServerCores.toFixed(3)} | ${loaded.apiServerCores.toFixed(3)} |`,
      '',
      `Per agent: ${perAgent.toFixed(4)} requests/s and ${(coresPerAgent * 1000).toFixed(2)} millicores of the API server; at ${NODES} nodes: ${(perAgent * NODES).toFixed(1)} requests/s, ${(coresPerAgent * NODES).toFixed(2)} cores (linear).`,
      `During an API outage (kube-apiserver stopped), per kind of ADD over ${settings.agents} agents: a Pod of its node it has seen: ${line('seen')}; a kube-system Pod: ${line('kubeSystem')}; a Pod never seen: ${line('unseen')}.`,
      '',
    ].join('\n'),
  );
  process.stdout.write(`${JSON.stringify({ label: settings.label, settings, floor, loaded, perAgent, coresPerAgent, atThousandNodes: { requestsPerSecond: perAgent * NODES, cores: coresPerAgent * NODES }, outage })}\n`);
}

async function main(): Promise<void> {
  const settings = settingsOf(process.argv.slice(2));
  const work = await mkdtemp(join(tmpdir(), 'envoy-injector-cni-agents-'));
  const plane = await startControlPlane(settings.version, { controllers: false });
  const apiServer = plane.processes.find((managed) => managed.name.includes('apiserver'))?.child.pid;
  const agents: Agent[] = [];
  try {
    if (apiServer === undefined) throw new Error('no kube-apiserver process');
    const kubeconfig = await agentAccount(plane);
    await createPods(plane, settings);
    log(`cni-agents: ${settings.agents * settings.podsPerNode} Pods made; the API server at rest without agents, ${settings.restSeconds} s`);
    const floor = await atRest(plane, apiServer, settings.restSeconds);
    // A few at once: 2 cores start Node.js processes slowly.
    for (let index = 0; index < settings.agents; index += 4) {
      agents.push(...(await Promise.all(Array.from({ length: Math.min(4, settings.agents - index) }, (_, offset) => startAgent(work, index + offset, kubeconfig, settings)))));
    }
    log(`cni-agents: ${agents.length} agents ready; settling 20 s, then ${settings.restSeconds} s at rest`);
    await sleep(20_000);
    const loaded = await atRest(plane, apiServer, settings.restSeconds);
    log('cni-agents: an API outage: kube-apiserver stopped while each agent is asked for three Pods');
    const outage = await duringOutage(agents, apiServer);
    report(settings, floor, loaded, outage);
  } finally {
    await stopAgents(agents);
    await plane.stop();
    await rm(work, { recursive: true, force: true });
  }
}

await main();
