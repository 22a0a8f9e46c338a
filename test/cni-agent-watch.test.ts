import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { startCniAgent, type CniAgent } from '../src/commands/cni-agent.js';
import { admitPod, applyPodPatch, parseTemplateFile, type JsonObject } from '../src/injection/index.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { ROOT } from './helpers/fixtures.js';

/**
 * The node agent's Pods from one LIST + WATCH of its node (issue 50, points
 * 6 and 7), against the fake API server: rounds and ADDs make no request of
 * their own, the watch relists after 410 Gone, an ADD is answered from the
 * cache while the API is down, and a Pod of a namespace the injector never
 * captures is never waited on. The shim's requests are sent on the agent's
 * socket as the shim sends them; no network namespace (no rules run here:
 * the Pods are in envoy-init mode, or not ours).
 */

const NODE = 'node-a';
const templates = parseTemplateFile(readFileSync(join(ROOT, 'test/golden/capture-templates.yaml'), 'utf8'));

/** A Pod injected in envoy-init mode (the agent passes its ADD on, no rules), bound to NODE. */
function classicPod(namespace: string, name: string, nodeName = NODE): JsonObject & { metadata: { name: string; namespace: string } } {
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace, annotations: { 'envoy-injector.io/inject': 'true', 'envoy-injector.io/template': 'always', 'envoy-injector.io/capture': 'true' } }, spec: { containers: [{ name: 'app', image: 'app:1' }] } } as JsonObject;
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace, namespaceLabels: {}, pod, templates, options: { nativeSidecar: true } });
  assert.ok(admission.injection !== undefined);
  const injected = applyPodPatch(pod, admission.injection.patch);
  return { ...injected, metadata: { ...(injected['metadata'] as JsonObject), name, namespace }, spec: { ...(injected['spec'] as JsonObject), nodeName } };
}

/** One request as the shim sends it (CNI_* lines, an empty line, the configuration), and the agent's answer. */
function askShim(socket: string, env: Record<string, string>): Promise<{ code: number; stdout: string }> {
  const config = JSON.stringify({ cniVersion: '1.0.0', name: 'ei-node', type: 'envoy-injector-cni', prevResult: { cniVersion: '1.0.0', ips: [{ address: '198.51.100.7/24' }] } });
  return new Promise((resolve, reject) => {
    const connection = createConnection(socket);
    let text = '';
    connection.on('data', (chunk: Buffer) => (text += chunk.toString()));
    connection.on('end', () => resolve({ code: Number(text.slice(0, text.indexOf('\n'))), stdout: text.slice(text.indexOf('\n') + 1) }));
    connection.on('error', reject);
    connection.end(`${Object.entries(env).map(([key, value]) => `${key}=${value}`).join('\n')}\n\n${config}`);
  });
}

const add = (socket: string, namespace: string, name: string, uid?: string): Promise<{ code: number; stdout: string }> =>
  askShim(socket, { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_NETNS: '/var/run/netns/none', CNI_IFNAME: 'eth0', CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name}${uid === undefined ? '' : `;K8S_POD_UID=${uid}`}` });

const until = async (what: string, probe: () => boolean, timeoutMs = 10_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!probe()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
};

describe('the CNI agent keeps its node\'s Pods from one LIST + WATCH (issue 50)', () => {
  let fake: FakeApiServer;
  let agent: CniAgent | undefined;
  let dir = '';
  const logs: string[] = [];
  const socket = (): string => join(dir, 'cni.sock');
  /** The requests for Pods: LISTs and WATCHes of the collection, GETs of one Pod. */
  const podLists = () => fake.requests.filter((request) => request.path === '/api/v1/pods' && request.query['watch'] !== 'true');
  const podWatches = () => fake.requests.filter((request) => request.path === '/api/v1/pods' && request.query['watch'] === 'true');
  const podReads = (namespace: string, name: string) => fake.requests.filter((request) => request.method === 'GET' && request.path === `/api/v1/namespaces/${namespace}/pods/${name}`);

  before(async () => {
    fake = await FakeApiServer.start();
    fake.apply('pods', classicPod('shop', 'web'));
    fake.apply('pods', classicPod('shop', 'elsewhere', 'node-b'));
    dir = await mkdtemp(join(tmpdir(), 'envoy-injector-agent-watch-'));
    for (const folder of ['bin', 'net.d']) await mkdir(join(dir, folder));
    await writeFile(join(dir, 'shim'), 'not run here\n');
    await writeFile(join(dir, 'net.d', '10-ei-node.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: 'ei-node', plugins: [{ type: 'bridge' }] }));
    const kubeConfig = new KubeConfig();
    kubeConfig.loadFromFile(fake.writeKubeconfig());
    const io = { stdout: { write: (text: string) => logs.push(text) }, stderr: { write: (text: string) => logs.push(text) }, stdin: process.stdin };
    agent = await startCniAgent(
      {
        nodeName: NODE,
        plugin: join(dir, 'shim'),
        binDir: join(dir, 'bin'),
        confDir: join(dir, 'net.d'),
        agentSocket: socket(),
        rules: join(dir, 'no-rules.sh'),
        readyFile: join(dir, 'ready'),
        intervalMs: 600_000,
        injectorNamespace: 'mesh-system',
        excludedNamespaces: ['tools'],
        watch: { backoff: { initialMs: 10, maxMs: 50 } },
      },
      kubeConfig,
      io,
    );
    await until('the watch of the node\'s Pods', () => fake.openWatches('pods') === 1);
  });
  after(async () => {
    fake.failNext(0);
    fake.stall(undefined);
    await agent?.stop();
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('rounds and ADDs make no request: one LIST of the node\'s Pods, then one WATCH with bookmarks from its resourceVersion', async () => {
    for (let round = 0; round < 5; round += 1) await agent?.tick();
    for (let round = 0; round < 3; round += 1) assert.equal((await add(socket(), 'shop', 'web')).code, 0, logs.join(''));
    assert.equal(podLists().length, 1, `LISTs of Pods: ${JSON.stringify(podLists())}`);
    assert.equal(podLists()[0]?.query['fieldSelector'], `spec.nodeName=${NODE}`);
    assert.equal(podWatches().length, 1);
    const watch = podWatches()[0];
    assert.deepEqual([watch?.query['fieldSelector'], watch?.query['allowWatchBookmarks'], watch?.query['resourceVersion'] !== undefined && watch.query['resourceVersion'] !== ''], [`spec.nodeName=${NODE}`, 'true', true]);
    assert.deepEqual(podReads('shop', 'web'), [], 'an ADD for a cached Pod read it from the API');
    assert.equal(agent?.pods.get('shop', 'elsewhere'), undefined, 'another node\'s Pod in the cache');
  });

  it('an API outage: an ADD for a Pod in the cache is answered from it', async () => {
    fake.failNext(1_000, 503);
    try {
      const answer = await add(socket(), 'shop', 'web');
      assert.equal(answer.code, 0, answer.stdout);
      assert.deepEqual(JSON.parse(answer.stdout), { cniVersion: '1.0.0', ips: [{ address: '198.51.100.7/24' }] });
      assert.deepEqual(podReads('shop', 'web'), []);
    } finally {
      fake.failNext(0);
    }
  });

  it('an API outage: a Pod of a namespace the injector never captures is not waited on; one that could be captured fails closed', async () => {
    fake.stall(() => true);
    try {
      for (const [namespace, name] of [['kube-system', 'coredns-7db6d8ff4d-x2x9k'], ['mesh-system', 'injector-0'], ['tools', 'debug']] as const) {
        const answer = await add(socket(), namespace, name);
        assert.equal(answer.code, 0, `${namespace}/${name}: ${answer.stdout}`);
        assert.deepEqual(JSON.parse(answer.stdout), { cniVersion: '1.0.0', ips: [{ address: '198.51.100.7/24' }] });
        assert.deepEqual(podReads(namespace, name), [], `${namespace}/${name} read from the API`);
      }
    } finally {
      fake.stall(undefined);
    }
    fake.failNext(1_000, 503);
    try {
      const answer = await add(socket(), 'shop', 'not-yet-seen');
      assert.equal(answer.code, 1);
      const error = JSON.parse(answer.stdout) as { code: number; msg: string };
      assert.equal(error.code, 11);
      assert.match(error.msg, /cannot read Pod shop\/not-yet-seen to judge its capture/);
    } finally {
      fake.failNext(0);
    }
  });

  it('a Pod the watch has not delivered yet is read from the API, as is one whose uid is not the cached one\'s', async () => {
    fake.freezeWatches();
    fake.apply('pods', classicPod('shop', 'fresh'));
    assert.equal((await add(socket(), 'shop', 'fresh')).code, 0, logs.join(''));
    assert.equal(podReads('shop', 'fresh').length, 1);
    // The name made again (a StatefulSet's Pod) while the watch lags: the cached one is another Pod.
    fake.remove('pods', 'shop', 'web');
    const again = fake.apply('pods', classicPod('shop', 'web'));
    assert.equal((await add(socket(), 'shop', 'web', String(again.metadata['uid']))).code, 0, logs.join(''));
    assert.equal(podReads('shop', 'web').length, 1);
    fake.dropWatches();
    await until('the watch back', () => fake.openWatches('pods') === 1 && agent?.pods.get('shop', 'fresh') !== undefined);
  });

  it('410 Gone: the watch lists the node\'s Pods again and the cache holds what changed meanwhile', async () => {
    const lists = podLists().length;
    fake.dropWatches();
    fake.apply('pods', classicPod('shop', 'late'));
    fake.remove('pods', 'shop', 'fresh');
    fake.compactHistory();
    await until('the relisted cache', () => agent?.pods.get('shop', 'late') !== undefined && agent.pods.get('shop', 'fresh') === undefined);
    assert.ok(fake.expiredWatches >= 1, 'no watch was answered 410');
    assert.equal(podLists().length, lists + 1);
    assert.equal((await add(socket(), 'shop', 'late')).code, 0);
    assert.deepEqual(podReads('shop', 'late'), []);
  });
});
