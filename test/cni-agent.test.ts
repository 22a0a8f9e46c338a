import assert from 'node:assert/strict';
import { execFile, spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import type { Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { promisify } from 'node:util';
import { installPlugin, rulesRunner, serveShim, uninstallPlugin, type AgentDeps } from '../src/node/agent.js';
import { CNI_PLUGIN_TYPE } from '../src/node/cni/chain-config.js';
import { admitPod, applyPodPatch, parseTemplateFile, type JsonObject } from '../src/injection/index.js';
import { CniAgentMetrics } from '../src/node/agent-metrics.js';
import { ROOT } from './helpers/fixtures.js';
import { metricSample } from './helpers/metric-sample.js';

/**
 * The node agent's core with the real pieces (docs/design.md §11, CNI mode):
 * the shim built with gcc -static and installed by the agent into a CNI
 * binary folder, its entry put into a bridge configuration list, and a
 * runtime's ADD for a network namespace this test makes (IPv4, then an
 * IPv6-only one): the agent reads the Pod (a function here; the API in the
 * agent), runs init/capture-rules.sh there with nsenter, and
 * envoy-capture-check then finds the redirect. What is not here: a kubelet and containerd calling the chain (the node tier).
 */

const run = promisify(execFile);
const NETNS = `envoy-agent-${process.pid}`;
const PEER = `${NETNS}-peer`;
/** A second Pod's namespace, IPv6-only: no IPv4 address or route besides loopback's. */
const NETNS_V6 = `${NETNS}-v6`;
const NAMESPACES = [NETNS, PEER, NETNS_V6];
const BRIDGE = { cniVersion: '1.0.0', name: 'ei-node', plugins: [{ type: 'bridge', bridge: 'ei-node0', ipam: { type: 'host-local', subnet: '198.51.100.0/24' } }] };

async function missingTools(): Promise<string | undefined> {
  if (process.platform !== 'linux') return 'not Linux';
  if (process.getuid?.() !== 0) return 'not root (network namespaces, nsenter and iptables need it)';
  for (const tool of ['ip', 'iptables', 'nsenter', 'setpriv', 'gcc']) {
    try {
      await run('sh', ['-c', `command -v ${tool}`]);
    } catch {
      return `no ${tool} on PATH (apt-get install iproute2 iptables util-linux gcc libc6-dev)`;
    }
  }
  return undefined;
}
const missing = await missingTools();
if (missing !== undefined && process.env['CI'] === 'true') throw new Error(`the CNI agent test cannot run in CI: ${missing}`);
if (missing !== undefined) console.log(`skipped: the CNI agent with its shim in a network namespace (${missing})`);

process.once('exit', () => {
  for (const namespace of NAMESPACES) spawnSync('ip', ['netns', 'del', namespace], { stdio: 'ignore' });
});

const templates = parseTemplateFile(readFileSync(join(ROOT, 'test/golden/capture-templates.yaml'), 'utf8'));
function injected(template: string): JsonObject {
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', namespace: 'shop', annotations: { 'envoy-injector.io/inject': 'true', 'envoy-injector.io/template': template, 'envoy-injector.io/capture': 'true' } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } as JsonObject;
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod, templates, options: { nativeSidecar: true } });
  assert.ok(admission.injection !== undefined);
  return applyPodPatch(pod, admission.injection.patch);
}

describe('the CNI agent\'s core with its static shim, in a network namespace', { skip: missing !== undefined, timeout: 120_000 }, () => {
  let dir = '';
  let server: Server | undefined;
  let pods = new Map<string, JsonObject | Error>();
  const places = () => ({ plugin: join(dir, 'image', CNI_PLUGIN_TYPE), binDir: join(dir, 'bin'), confDir: join(dir, 'net.d'), agentSocket: join(dir, 'cni.sock') });
  const conflist = (): string => join(places().confDir, '10-ei-node.conflist');
  const deps: AgentDeps = {
    readPod: async (namespace, name) => {
      const pod = pods.get(`${namespace}/${name}`);
      if (pod instanceof Error) throw pod;
      return pod;
    },
    runRules: rulesRunner(join(ROOT, 'init', 'capture-rules.sh')),
    countSetUp: (result) => metrics.setUp(result),
  };
  const metrics = new CniAgentMetrics({ processMetrics: false });
  /** The set-ups counted so far: captured, skipped, error. */
  const setUps = async (): Promise<(number | undefined)[]> => {
    const text = (await metrics.render()).body;
    return ['captured', 'skipped', 'error'].map((result) => metricSample(text, 'envoy_injector_cni_agent_pod_setups_total', { result }));
  };
  /** The runtime's call of our plugin, last in the chain: the list's name and version, our entry, the previous result. */
  const add = (pod: string, netns = NETNS, address = '198.51.100.7/24'): Promise<{ code: number | null; stdout: string }> =>
    new Promise((resolve) => {
      const entry = (JSON.parse(readFileSync(conflist(), 'utf8')) as { plugins: Record<string, unknown>[] }).plugins.at(-1);
      const config = JSON.stringify({ cniVersion: '1.0.0', name: 'ei-node', ...entry, prevResult: { cniVersion: '1.0.0', ips: [{ address }] } });
      const child = spawn(join(places().binDir, CNI_PLUGIN_TYPE), [], {
        env: { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_NETNS: `/var/run/netns/${netns}`, CNI_IFNAME: 'eth0', CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=${pod}`, CNI_PATH: places().binDir },
      });
      let stdout = '';
      child.stdout.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
      child.on('close', (code) => resolve({ code, stdout }));
      child.stdin.end(config);
    });
  const natRules = async (binary = 'iptables', netns = NETNS): Promise<string> => (await run('ip', ['netns', 'exec', netns, binary, '-t', 'nat', '-S'])).stdout;
  const check = async (netns = NETNS): Promise<number> => {
    const command = ['netns', 'exec', netns, 'setpriv', '--reuid=65532', '--regid=65532', '--clear-groups', process.execPath, '--import', 'tsx', join(ROOT, 'src', 'main.ts'), 'check-capture'];
    const args = (decideArgs(pods.get('shop/captured')) ?? []).concat(['--timeout-seconds', '1']);
    return new Promise((resolve) => execFile('ip', [...command, ...args], { cwd: ROOT }, (error) => resolve(error === null ? 0 : typeof error.code === 'number' ? error.code : -1)));
  };

  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'envoy-injector-agent-'));
    for (const folder of ['image', 'bin', 'net.d']) await mkdir(join(dir, folder));
    await run('gcc', ['-static', '-Os', '-o', places().plugin, join(ROOT, 'cni', 'envoy-injector-cni.c')]);
    await writeFile(conflist(), `${JSON.stringify(BRIDGE, null, 2)}\n`);
    for (const namespace of NAMESPACES) await run('ip', ['netns', 'del', namespace]).catch(() => undefined);
    await run('ip', ['netns', 'add', NETNS]);
    await run('ip', ['netns', 'add', PEER]);
    await run('ip', ['-n', NETNS, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'eth0', 'netns', PEER]);
    await run('ip', ['-n', NETNS, 'addr', 'add', '198.51.100.7/24', 'dev', 'eth0']);
    for (const namespace of [NETNS, PEER]) for (const link of ['lo', 'eth0']) await run('ip', ['-n', namespace, 'link', 'set', link, 'up']);
    await run('ip', ['netns', 'add', NETNS_V6]);
    await run('ip', ['-n', NETNS_V6, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'to-v6', 'netns', PEER]);
    await run('ip', ['-n', NETNS_V6, '-6', 'addr', 'add', '2001:db8:7::7/64', 'dev', 'eth0', 'nodad']);
    for (const link of ['lo', 'eth0']) await run('ip', ['-n', NETNS_V6, 'link', 'set', link, 'up']);
    await run('ip', ['-n', PEER, 'link', 'set', 'to-v6', 'up']);
    await run('ip', ['-n', NETNS_V6, '-6', 'route', 'add', 'default', 'via', '2001:db8:7::1', 'dev', 'eth0']);
    pods = new Map<string, JsonObject | Error>([
      ['shop/captured', injected('cni')],
      ['shop/captured-v6', injected('cni')],
      ['shop/classic', injected('always')],
      ['shop/unreachable', new Error('connect ECONNREFUSED 10.96.0.1:443')],
    ]);
    server = await serveShim(places().agentSocket, deps);
  });
  after(async () => {
    server?.close();
    for (const namespace of NAMESPACES) await run('ip', ['netns', 'del', namespace]).catch(() => undefined);
    await rm(dir, { recursive: true, force: true });
  });

  it('install: the shim in the binary folder, our entry last in the primary configuration', async () => {
    const edit = await installPlugin(places());
    assert.deepEqual([('changed' in edit && edit.changed), edit.file], [true, '10-ei-node.conflist']);
    assert.ok(existsSync(join(places().binDir, CNI_PLUGIN_TYPE)));
    const plugins = (JSON.parse(await readFile(conflist(), 'utf8')) as typeof BRIDGE).plugins;
    assert.deepEqual(plugins.at(-1), { type: CNI_PLUGIN_TYPE, agentSocket: places().agentSocket });
  });

  it('a Pod in envoy-init mode: ADD passes the result on, no rules', async () => {
    const result = await add('classic');
    assert.equal(result.code, 0, result.stdout);
    assert.deepEqual(JSON.parse(result.stdout), { cniVersion: '1.0.0', ips: [{ address: '198.51.100.7/24' }] });
    assert.doesNotMatch(await natRules(), /ENVOY_OUTBOUND/);
    assert.equal(await check(), 69, 'without the rules the check fails');
    assert.deepEqual(await setUps(), [0, 1, 0]);
  });

  it('the API unreachable: ADD fails with "try again later", naming the Pod, and nothing is installed', async () => {
    const result = await add('unreachable');
    assert.equal(result.code, 1);
    const error = JSON.parse(result.stdout) as { code: number; msg: string };
    assert.equal(error.code, 11);
    assert.match(error.msg, /cannot read Pod shop\/unreachable to judge its capture: connect ECONNREFUSED/);
    assert.doesNotMatch(await natRules(), /ENVOY_OUTBOUND/);
    assert.deepEqual(await setUps(), [0, 1, 1]);
  });

  it('a Pod in CNI mode: ADD installs init/capture-rules.sh\'s rules in its namespace, and its check then passes', async () => {
    const result = await add('captured');
    assert.equal(result.code, 0, result.stdout);
    assert.deepEqual(JSON.parse(result.stdout), { cniVersion: '1.0.0', ips: [{ address: '198.51.100.7/24' }] });
    assert.match(await natRules(), /-A OUTPUT -p tcp -j ENVOY_OUTBOUND/);
    assert.match(await natRules(), /-A ENVOY_OUTBOUND -d 169\.254\.169\.254\/32 -j RETURN/);
    assert.equal(await check(), 0);
    assert.deepEqual(await setUps(), [1, 1, 1]);
  });

  it('an IPv6-only Pod in CNI mode: ADD installs the rules with no IPv4 route, and its check passes in IPv6', async () => {
    assert.equal(await check(NETNS_V6), 69, 'without the rules the check fails');
    const result = await add('captured-v6', NETNS_V6, '2001:db8:7::7/64');
    assert.equal(result.code, 0, result.stdout);
    assert.deepEqual(JSON.parse(result.stdout), { cniVersion: '1.0.0', ips: [{ address: '2001:db8:7::7/64' }] });
    assert.match(await natRules('ip6tables', NETNS_V6), /-A OUTPUT -p tcp -j ENVOY_OUTBOUND/);
    assert.equal(await check(NETNS_V6), 0);
    assert.deepEqual(await setUps(), [2, 1, 1]);
  });

  it('uninstall: the configuration as it was, the shim gone', async () => {
    await uninstallPlugin(places());
    assert.deepEqual(JSON.parse(await readFile(conflist(), 'utf8')), BRIDGE);
    assert.equal(existsSync(join(places().binDir, CNI_PLUGIN_TYPE)), false);
  });
});

/** The rule arguments of a Pod's check container. */
function decideArgs(pod: JsonObject | Error | undefined): string[] | undefined {
  if (pod === undefined || pod instanceof Error) return undefined;
  const inits = ((pod['spec'] as JsonObject)['initContainers'] as JsonObject[] | undefined) ?? [];
  const check = inits.find((init) => init['name'] === 'envoy-capture-check');
  return check === undefined ? undefined : (check['args'] as string[]);
}
