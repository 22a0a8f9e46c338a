import assert from 'node:assert/strict';
import { execFile, spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, it } from 'node:test';
import { promisify } from 'node:util';
import { KubeConfig } from '@kubernetes/client-node';
import { startCniAgent, type CniAgent } from '../../src/commands/cni-agent.js';
import { CNI_PLUGIN_TYPE } from '../../src/node/cni/chain-config.js';
import { admitPod, applyPodPatch, parseTemplateFile, type JsonObject } from '../../src/injection/index.js';
import { ROOT } from '../helpers/fixtures.js';
import { metricSample } from '../helpers/metric-sample.js';
import { forEachKubeVersion } from './control-plane.js';
import { createNamespace, deleteNamespaces, eventually, helmInstall, helmUninstall, uniqueName, type Release } from './cluster.js';
import { deleteNode, nodeBoundToken } from './node-bound-token.js';
import { kubeCall } from './policy-parity.js';

/**
 * The CNI agent (`envoy-injector cni-agent`, docs/design.md §11, CNI mode)
 * against a real API server, as the chart's ServiceAccount for it (the chart
 * installed with proxy.capture.mode cni: its ClusterRole is all the agent
 * has), with its real shim in CNI folders of its own
 * and a network namespace this test makes: it installs the plugin, keeps its
 * node's Pods from one watch (an ADD and its rounds read that, so they work
 * with its role cut to `watch` alone; a Pod of a namespace never captured is
 * not read), installs the rules for a Pod in CNI mode a runtime's ADD names,
 * puts its entry back after the primary plugin rewrote the file, repairs a
 * Pod whose check found no rules (a Warning Event, then the delete), keeps
 * a bare one (a Warning Event once), counts a delete its role refuses as
 * failed and goes on with the round, and leaves the configuration as it was
 * when it stops. No kubelet: the Pods'
 * status is written as a kubelet would, and a deleted Pod stays terminating.
 * Its metrics, scraped over HTTP, count what it did.
 */

const run = promisify(execFile);
const NODE = 'ei-cni-node';
const NETNS = `envoy-cni-agent-${process.pid}`;
const BRIDGE = { cniVersion: '1.0.0', name: 'ei-node', plugins: [{ type: 'bridge', bridge: 'ei-node0', ipam: { type: 'host-local', subnet: '198.51.100.0/24' } }] };

async function missingTools(): Promise<string | undefined> {
  if (process.platform !== 'linux' || process.getuid?.() !== 0) return 'not root on Linux';
  for (const tool of ['ip', 'iptables', 'nsenter', 'gcc']) {
    try {
      await run('sh', ['-c', `command -v ${tool}`]);
    } catch {
      return `no ${tool} on PATH`;
    }
  }
  return undefined;
}
const missing = await missingTools();
if (missing !== undefined && process.env['CI'] === 'true') throw new Error(`the CNI agent test cannot run in CI: ${missing}`);
if (missing !== undefined) console.log(`skipped: the CNI agent against a real API server (${missing})`);
process.once('exit', () => void spawnSync('ip', ['netns', 'del', NETNS], { stdio: 'ignore' }));

const templates = parseTemplateFile(readFileSync(join(ROOT, 'test/golden/capture-templates.yaml'), 'utf8'));
/** A Pod as the webhook stores it in CNI mode (template `cni`), bound to the node, not injected again. */
function cniPod(name: string): JsonObject {
  const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name, annotations: { 'envoy-injector.io/template': 'cni', 'envoy-injector.io/capture': 'true' } }, spec: { nodeName: NODE, containers: [{ name: 'app', image: 'registry.example/app:1' }] } } as JsonObject;
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'x', namespaceLabels: { 'envoy-injector.io/inject': 'enabled' }, pod, templates, options: { nativeSidecar: false } });
  assert.ok(admission.injection !== undefined);
  const injected = applyPodPatch(pod, admission.injection.patch);
  const metadata = injected['metadata'] as JsonObject;
  return { ...injected, metadata: { ...metadata, annotations: { ...(metadata['annotations'] as JsonObject), 'envoy-injector.io/inject': 'false' } } };
}

/** The verbs the agent's ClusterRole must allow, and some it must not. */
const NEEDED = [
  { verb: 'get', resource: 'pods' },
  { verb: 'list', resource: 'pods' },
  { verb: 'watch', resource: 'pods' },
  { verb: 'delete', resource: 'pods' },
  { verb: 'create', group: 'events.k8s.io', resource: 'events' },
];
const NOT_NEEDED = [
  { verb: 'create', resource: 'pods' },
  { verb: 'update', resource: 'pods' },
  { verb: 'patch', resource: 'pods' },
  { verb: 'update', resource: 'pods', subresource: 'status' },
  { verb: 'get', resource: 'secrets' },
  { verb: 'list', resource: 'nodes' },
  { verb: 'create', resource: 'events' },
  { verb: 'delete', group: 'events.k8s.io', resource: 'events' },
  { verb: 'patch', group: 'apps', resource: 'daemonsets' },
];

forEachKubeVersion('the CNI agent: plugin installed, rules for Pods in CNI mode, repair, uninstall', (plane, version) => {
  const namespace = uniqueName('cni-agent');
  let release: Release | undefined;
  let agentToken = '';
  let dir = '';
  let agent: CniAgent | undefined;
  /** What the agent said, for the failure messages. */
  const logs: string[] = [];
  const places = () => ({ plugin: join(dir, 'envoy-injector-cni.src'), binDir: join(dir, 'bin'), confDir: join(dir, 'net.d'), agentSocket: join(dir, 'cni.sock') });
  const conflist = (): string => join(places().confDir, '10-ei-node.conflist');
  const entries = async (): Promise<unknown[]> => ((JSON.parse(await readFile(conflist(), 'utf8')) as { plugins: { type: string }[] }).plugins).map((plugin) => plugin.type);
  const natRules = async (): Promise<string> => (await run('ip', ['netns', 'exec', NETNS, 'iptables', '-t', 'nat', '-S'])).stdout;

  before(async () => {
    if (missing !== undefined) return;
    dir = await mkdtemp(join(tmpdir(), 'envoy-injector-cni-agent-'));
    for (const folder of ['bin', 'net.d']) await mkdir(join(dir, folder));
    await run('gcc', ['-static', '-Os', '-o', places().plugin, join(ROOT, 'cni', 'envoy-injector-cni.c')]);
    await writeFile(conflist(), `${JSON.stringify(BRIDGE, null, 2)}\n`);
    await run('ip', ['netns', 'del', NETNS]).catch(() => undefined);
    await run('ip', ['netns', 'add', NETNS]);
    await createNamespace(plane(), namespace, {});
    release = await helmInstall(plane(), { name: uniqueName('cni'), namespace: uniqueName('cni-system') }, { proxy: { capture: { mode: 'cni' } } });
    const account = release.manifests.find((manifest) => manifest.kind === 'ServiceAccount' && manifest.metadata.name.endsWith('-cni-agent'));
    assert.ok(account !== undefined, 'the chart made no ServiceAccount for the agent');
    // As the kubelet gets it: bound to the agent's Pod on NODE (the chart's node policy admits its deletes and Events there only).
    const bound = await nodeBoundToken(plane(), { namespace: release.namespace, account: account.metadata.name, node: NODE, pod: 'cni-agent', labels: { 'envoy-injector.io/injector': account.metadata.name } });
    agentToken = bound.token;
    const asAgent = new KubeConfig();
    asAgent.loadFromFile(bound.kubeconfigPath);
    // The repaired Pod needs a controller (the agent deletes only what is made again). Any object will do
    // as its owner for the agent, which reads only the reference; a ConfigMap keeps the garbage collector
    // content (the owner exists) and no controller acts on it, as one would on a ReplicaSet's Pod.
    const owner = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${namespace}/configmaps`, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'owner' } });
    assert.equal(owner.status, 201, JSON.stringify(owner.body));
    const controllerRef = { apiVersion: 'v1', kind: 'ConfigMap', name: 'owner', uid: String((owner.body['metadata'] as JsonObject)['uid']), controller: true };
    for (const name of ['captured', 'broken', 'bare', 'a-undeletable', 'deletable']) {
      const pod = cniPod(name);
      if (name !== 'captured' && name !== 'bare') (pod['metadata'] as JsonObject)['ownerReferences'] = [controllerRef];
      const created = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${namespace}/pods`, pod);
      assert.equal(created.status, 201, JSON.stringify(created.body));
    }
    const silent = { stdout: { write: (text: string) => logs.push(text) }, stderr: { write: (text: string) => logs.push(text) }, stdin: process.stdin };
    agent = await startCniAgent({ ...places(), nodeName: NODE, rules: join(ROOT, 'init', 'capture-rules.sh'), readyFile: join(dir, 'ready'), intervalMs: 60_000, metrics: { host: '127.0.0.1', port: 0 }, metricsRelease: `${release.namespace}/${release.name}` }, asAgent, silent);
  });
  after(async () => {
    await agent?.stop().catch(() => undefined);
    await run('ip', ['netns', 'del', NETNS]).catch(() => undefined);
    if (dir !== '') await rm(dir, { recursive: true, force: true });
    if (release !== undefined) await helmUninstall(plane(), release).catch(() => undefined);
    await deleteNamespaces(plane(), [namespace, ...(release === undefined ? [] : [release.namespace])]);
    await deleteNode(plane(), NODE).catch(() => undefined);
  });

  it(`the chart's ServiceAccount for the agent may do what the agent does, and no more (${version})`, { skip: missing }, async () => {
    assert.ok(release !== undefined);
    assert.ok(release.manifests.some((manifest) => manifest.kind === 'DaemonSet'), 'no DaemonSet installed');
    const allowed = async (attributes: Record<string, string>): Promise<boolean> => {
      const review = await kubeCall({ ...plane(), adminToken: agentToken }, 'POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: { namespace, ...attributes } } });
      assert.equal(review.status, 201, JSON.stringify(review.body));
      return (review.body['status'] as JsonObject)['allowed'] === true;
    };
    for (const attributes of NEEDED) assert.equal(await allowed(attributes), true, `not allowed: ${JSON.stringify(attributes)}`);
    for (const attributes of NOT_NEEDED) assert.equal(await allowed(attributes), false, `allowed, though the agent needs it not: ${JSON.stringify(attributes)}`);
  });

  it(`installs the plugin, ready only then (${version})`, { skip: missing }, async () => {
    assert.ok(existsSync(join(places().binDir, CNI_PLUGIN_TYPE)));
    assert.deepEqual(await entries(), ['bridge', CNI_PLUGIN_TYPE]);
    assert.ok(existsSync(join(dir, 'ready')));
  });

  /** A runtime's ADD through the installed shim, for Pod NAME of POD_NAMESPACE. */
  const shimAdd = async (podNamespace: string, name: string): Promise<{ status: number | null; stdout: string }> => {
    const entry = (JSON.parse(await readFile(conflist(), 'utf8')) as { plugins: Record<string, unknown>[] }).plugins.at(-1);
    const config = JSON.stringify({ cniVersion: '1.0.0', name: 'ei-node', ...entry, prevResult: { cniVersion: '1.0.0', ips: [{ address: '198.51.100.9/24' }] } });
    const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: 'c1', CNI_NETNS: `/var/run/netns/${NETNS}`, CNI_IFNAME: 'eth0', CNI_ARGS: `K8S_POD_NAMESPACE=${podNamespace};K8S_POD_NAME=${name}`, CNI_PATH: places().binDir };
    // Not spawnSync: the agent answers from this very process.
    return new Promise((resolve) => {
      const child = execFile(join(places().binDir, CNI_PLUGIN_TYPE), [], { env }, (error, stdout) => resolve({ status: error === null ? 0 : typeof error.code === 'number' ? error.code : -1, stdout }));
      child.stdin?.end(config);
    });
  };

  it(`a runtime's ADD for a Pod in CNI mode, read from the agent's watch: the rules in its namespace (${version})`, { skip: missing }, async () => {
    const result = await shimAdd(namespace, 'captured');
    assert.equal(result.status, 0, result.stdout);
    assert.deepEqual(JSON.parse(result.stdout), { cniVersion: '1.0.0', ips: [{ address: '198.51.100.9/24' }] });
    assert.match(await natRules(), /-A OUTPUT -p tcp -j ENVOY_OUTBOUND/);
  });

  it(`puts its entry back after the primary plugin rewrote the file (${version})`, { skip: missing }, async () => {
    await writeFile(conflist(), `${JSON.stringify(BRIDGE, null, 2)}\n`);
    await agent?.tick();
    assert.deepEqual(await entries(), ['bridge', CNI_PLUGIN_TYPE]);
  });

  it(`the node's Pods from its watch: with its role cut to watch alone, an ADD for a Pod it holds and its rounds still work; a Pod of a namespace never captured is not read (${version})`, { skip: missing }, async () => {
    assert.ok(release !== undefined);
    // A Pod bound to the node after the agent started: the watch (the chart's role, a field selector on the node) delivers it.
    const plain = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'plain', annotations: { 'envoy-injector.io/inject': 'false' } }, spec: { nodeName: NODE, containers: [{ name: 'app', image: 'registry.example/app:1' }] } };
    const created = await kubeCall(plane(), 'POST', `/api/v1/namespaces/${namespace}/pods`, plain);
    assert.equal(created.status, 201, JSON.stringify(created.body));
    await watched('plain', String((created.body['metadata'] as JsonObject)['resourceVersion']));
    const rolePath = `/apis/rbac.authorization.k8s.io/v1/clusterroles/${release.manifests.find((manifest) => manifest.kind === 'ClusterRole' && manifest.metadata.name.endsWith('-cni-agent'))?.metadata.name ?? ''}`;
    const role = (await kubeCall(plane(), 'GET', rolePath)).body;
    const rules = role['rules'] as JsonObject[];
    const podRules = rules.filter((rule) => (rule['resources'] as string[]).includes('pods'));
    const watchOnly = [...rules.filter((rule) => !podRules.includes(rule)), { apiGroups: [''], resources: ['pods'], verbs: ['watch'] }];
    assert.equal((await kubeCall(plane(), 'PUT', rolePath, { ...role, rules: watchOnly })).status, 200);
    try {
      await eventually('the agent refused to get Pods', async () => {
        const review = await kubeCall({ ...plane(), adminToken: agentToken }, 'POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: { namespace, verb: 'get', resource: 'pods' } } });
        return (review.body['status'] as JsonObject)['allowed'] === false ? true : undefined;
      }, 10_000, 100);
      const said = logs.length;
      for (const [podNamespace, name] of [[namespace, 'plain'], ['kube-system', 'coredns-6f6b679f8f-abcde']] as const) {
        const answer = await shimAdd(podNamespace, name);
        assert.equal(answer.status, 0, `${podNamespace}/${name}: ${answer.stdout}; the agent said: ${logs.join('')}`);
        assert.deepEqual(JSON.parse(answer.stdout), { cniVersion: '1.0.0', ips: [{ address: '198.51.100.9/24' }] });
      }
      // A Pod it does not hold, in a namespace that may be captured: the API asked, refused, and the ADD fails closed.
      const unknown = await shimAdd(namespace, 'not-on-this-node');
      assert.equal(unknown.status, 1, unknown.stdout);
      assert.match(unknown.stdout, /"code":11.*cannot read Pod .*forbidden/);
      await agent?.tick();
      assert.doesNotMatch(logs.slice(said).join(''), /repair:/, 'a round asked the API server for the node\'s Pods');
    } finally {
      assert.equal((await kubeCall(plane(), 'PUT', rolePath, { ...(await kubeCall(plane(), 'GET', rolePath)).body, rules })).status, 200);
    }
  });

  /** Until the agent's watch holds Pod NAME at RESOURCEVERSION (its rounds read that cache). */
  const watched = (name: string, resourceVersion: string): Promise<true> =>
    eventually(`Pod ${name} at resourceVersion ${resourceVersion} in the agent's watch`, async () => ((agent?.pods.get(namespace, name)?.['metadata'] as JsonObject | undefined)?.['resourceVersion'] === resourceVersion ? true : undefined), 10_000, 50);

  /** Writes the status a kubelet writes when each Pod's check exited 69 (no rules), then runs one round. */
  const checkFoundNoRules = async (...names: string[]): Promise<void> => {
    for (const name of names) {
      const path = `/api/v1/namespaces/${namespace}/pods/${name}`;
      const pod = (await kubeCall(plane(), 'GET', path)).body;
      const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
      const status = {
        phase: 'Pending',
        initContainerStatuses: [{ name: 'envoy-capture-check', image: 'envoy-injector:0.1.0', imageID: '', ready: false, restartCount: 1, state: { waiting: { reason: 'CrashLoopBackOff' } }, lastState: { terminated: { exitCode: 69, reason: 'Error', startedAt: now, finishedAt: now } } }],
      };
      const written = await kubeCall(plane(), 'PUT', `${path}/status`, { ...pod, status });
      assert.equal(written.status, 200, JSON.stringify(written.body));
      await watched(name, String((written.body['metadata'] as JsonObject)['resourceVersion']));
    }
    await agent?.tick();
  };
  const eventsFor = async (name: string, reason: string): Promise<JsonObject[]> => {
    const list = (await kubeCall(plane(), 'GET', `/apis/events.k8s.io/v1/namespaces/${namespace}/events`)).body['items'] as JsonObject[];
    return list.filter((event) => event['reason'] === reason && (event['regarding'] as JsonObject)['name'] === name);
  };
  const podMetadata = async (name: string): Promise<JsonObject> => (await kubeCall(plane(), 'GET', `/api/v1/namespaces/${namespace}/pods/${name}`)).body['metadata'] as JsonObject;

  it(`a Pod whose check found no rules: a CaptureRepaired Event, then deleted (${version})`, { skip: missing }, async () => {
    await checkFoundNoRules('broken');
    const events = await eventually('the CaptureRepaired Event', async () => {
      const found = await eventsFor('broken', 'CaptureRepaired');
      return found.length > 0 ? found : undefined;
    }, 10_000, 200).catch((error: Error) => {
      throw new Error(`${error.message}; the agent said: ${logs.join('')}`);
    });
    assert.equal((events[0] as JsonObject)['type'], 'Warning');
    // No kubelet to finish it: the Pod is terminating, and the captured one untouched.
    const after = await kubeCall(plane(), 'GET', `/api/v1/namespaces/${namespace}/pods/broken`);
    assert.ok(after.status === 404 || (after.body['metadata'] as JsonObject)['deletionTimestamp'] !== undefined, JSON.stringify(after.body['metadata']));
    assert.equal((await podMetadata('captured'))['deletionTimestamp'], undefined);
  });

  it(`a bare Pod whose check found no rules is kept, with one CaptureNotRepaired Event (${version})`, { skip: missing }, async () => {
    await checkFoundNoRules('bare');
    await eventually('the CaptureNotRepaired Event', async () => ((await eventsFor('bare', 'CaptureNotRepaired')).length > 0 ? true : undefined), 10_000, 200).catch((error: Error) => {
      throw new Error(`${error.message}; the agent said: ${logs.join('')}`);
    });
    // Another round: still kept, and not warned about again.
    await agent?.tick();
    assert.equal((await podMetadata('bare'))['deletionTimestamp'], undefined, 'the bare Pod was deleted: nothing would make it again');
    assert.equal((await eventsFor('bare', 'CaptureNotRepaired')).length, 1);
    assert.deepEqual(await eventsFor('bare', 'CaptureRepaired'), []);
  });

  const terminating = async (name: string): Promise<boolean> => {
    const read = await kubeCall(plane(), 'GET', `/api/v1/namespaces/${namespace}/pods/${name}`);
    return read.status === 404 || (read.body['metadata'] as JsonObject)['deletionTimestamp'] !== undefined;
  };
  const repairs = async (): Promise<(number | undefined)[]> => {
    const text = await (await fetch(`http://127.0.0.1:${agent?.metricsPort ?? 0}/metrics`)).text();
    return ['deleted', 'failed', 'left'].map((result) => metricSample(text, 'envoy_injector_cni_agent_repairs_total', { result }));
  };
  /** Whether the agent's token may delete the Pod, as the API server's authorizer answers now (RBAC edits reach it a moment later). */
  const mayDelete = async (name: string): Promise<boolean> => {
    const review = await kubeCall({ ...plane(), adminToken: agentToken }, 'POST', '/apis/authorization.k8s.io/v1/selfsubjectaccessreviews', { apiVersion: 'authorization.k8s.io/v1', kind: 'SelfSubjectAccessReview', spec: { resourceAttributes: { namespace, verb: 'delete', resource: 'pods', name } } });
    return (review.body['status'] as JsonObject)['allowed'] === true;
  };
  const untilMayDelete = (name: string, allowed: boolean): Promise<boolean> =>
    eventually(`the agent ${allowed ? 'allowed' : 'refused'} to delete Pod ${name}`, async () => ((await mayDelete(name)) === allowed ? true : undefined), 10_000, 100);

  it(`a delete the agent's role refuses: counted failed, the round goes on, the next round deletes it (${version})`, { skip: missing }, async () => {
    assert.ok(release !== undefined);
    // The role's `delete` narrowed to Pod "deletable": "a-undeletable", before it in the list (lists come in key order), is refused.
    const rolePath = `/apis/rbac.authorization.k8s.io/v1/clusterroles/${release.manifests.find((manifest) => manifest.kind === 'ClusterRole' && manifest.metadata.name.endsWith('-cni-agent'))?.metadata.name ?? ''}`;
    const role = (await kubeCall(plane(), 'GET', rolePath)).body;
    const rules = role['rules'] as JsonObject[];
    const narrowed = [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] }, { apiGroups: [''], resources: ['pods'], verbs: ['delete'], resourceNames: ['deletable'] }, ...rules.slice(1)];
    assert.equal((await kubeCall(plane(), 'PUT', rolePath, { ...role, rules: narrowed })).status, 200);
    await untilMayDelete('a-undeletable', false);
    await untilMayDelete('deletable', true);
    const before = await repairs();
    await checkFoundNoRules('a-undeletable', 'deletable');
    assert.equal(await terminating('deletable'), true, `the agent said: ${logs.join('')}`);
    assert.equal(await terminating('a-undeletable'), false, 'a Pod the agent may not delete is deleted');
    // Refused first, and "deletable" deleted after it in the same round.
    const said = logs.join('');
    assert.match(said, new RegExp(`cni-agent: deleting Pod ${namespace}/a-undeletable: pods "a-undeletable" is forbidden`));
    assert.ok(said.indexOf(`deleting Pod ${namespace}/a-undeletable`) < said.indexOf(`deleted Pod ${namespace}/deletable`), said);
    const [deleted = 0, failed = 0, left = 0] = before;
    assert.deepEqual(await repairs(), [deleted + 1, failed + 1, left]);
    // The role whole again: the next round deletes it.
    assert.equal((await kubeCall(plane(), 'PUT', rolePath, { ...(await kubeCall(plane(), 'GET', rolePath)).body, rules })).status, 200);
    await untilMayDelete('a-undeletable', true);
    await agent?.tick();
    assert.equal(await terminating('a-undeletable'), true, `the agent said: ${logs.join('')}`);
    assert.deepEqual(await repairs(), [deleted + 2, failed + 1, left]);
  });

  it(`its metrics: one Pod captured, two skipped, one error, three repaired, one delete failed, one left, the plugin installed (${version})`, { skip: missing }, async () => {
    const response = await fetch(`http://127.0.0.1:${agent?.metricsPort ?? 0}/metrics`);
    assert.equal(response.status, 200);
    const text = await response.text();
    const setUps = ['captured', 'skipped', 'error'].map((result) => metricSample(text, 'envoy_injector_cni_agent_pod_setups_total', { result }));
    // Captured: "captured"; skipped: "plain" and kube-system's Pod; error: the Pod its role cut to watch could not read.
    assert.deepEqual(setUps, [1, 2, 1], text);
    const repairs = ['deleted', 'failed', 'left'].map((result) => metricSample(text, 'envoy_injector_cni_agent_repairs_total', { result }));
    assert.deepEqual(repairs, [3, 1, 1], text);
    assert.equal(metricSample(text, 'envoy_injector_cni_agent_plugin_installed', { envoy_injector_node: NODE, envoy_injector_release: `${release?.namespace ?? ''}/${release?.name ?? ''}` }), 1, text);
  });

  it(`stops: the configuration as it was, the shim and the ready file gone, no metrics served (${version})`, { skip: missing }, async () => {
    const metricsPort = agent?.metricsPort;
    assert.ok(metricsPort !== undefined);
    await agent?.stop();
    agent = undefined;
    await assert.rejects(fetch(`http://127.0.0.1:${metricsPort}/metrics`), 'the metrics port still answers after the stop');
    assert.deepEqual(JSON.parse(await readFile(conflist(), 'utf8')), BRIDGE);
    assert.equal(existsSync(join(places().binDir, CNI_PLUGIN_TYPE)), false);
    assert.equal(existsSync(join(dir, 'ready')), false);
  });

  it(`proxy.capture.mode back to initContainer: the agent's objects are gone (${version})`, { skip: missing }, async () => {
    assert.ok(release !== undefined);
    const upgraded = await helmInstall(plane(), release, { proxy: { capture: { mode: 'initContainer' } } }, { upgrade: true });
    assert.deepEqual(upgraded.manifests.filter((manifest) => manifest.metadata.name.includes('cni-agent')).map((manifest) => manifest.kind), []);
    const daemonSet = release.manifests.find((manifest) => manifest.kind === 'DaemonSet');
    assert.equal((await kubeCall(plane(), 'GET', `/apis/apps/v1/namespaces/${release.namespace}/daemonsets/${daemonSet?.metadata.name ?? ''}`)).status, 404);
  });
});
