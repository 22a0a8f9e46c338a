import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { cp, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { promisify } from 'node:util';
import { basename, join } from 'node:path';
import { after, before, it } from 'node:test';
import { AppsV1Api, RbacAuthorizationV1Api, type V1Pod } from '@kubernetes/client-node';
import { createNamespace, deleteNamespaces, eventually, uniqueName } from '../e2e/cluster.js';
import { CNI_PLUGIN_TYPE, primaryConfigFile } from '../../src/node/cni/chain-config.js';
import { CNI_BIN_DIR, CNI_CONF_DIR, CNI_CONFLIST, CONTAINERD_SOCKET, CONTAINERD_STATE_DIR, cniConfig, importArchive } from './containerd.js';
import { kubeBinary } from '../e2e/kube-binaries.js';
import { STATIC_POD_DIR } from './kubelet.js';
import { cniAgentRecipe } from './cni-agent-image.js';
import { buildImage } from './images.js';
import { injectorRecipe } from './injector-image.js';
import { NODE_DIR, NODE_IP, NODE_NAME } from './network.js';
import type { KubeVersion } from '../e2e/control-plane.js';
import { appContainer, appPod, broken, describePod, forEachNode, podReady, running, statuses } from './node-suite.js';
import { startScheduler, type Scheduler } from './scheduler.js';
import { askToCall, waitRelayed } from './traffic.js';

/**
 * Capture in CNI mode on a real kubelet (issue 37): the chart's agent
 * DaemonSet (its image from cni/Dockerfile's recipe, cni-agent-image.ts) runs
 * on the node with its host paths on the tier's own CNI folders (containerd's
 * conf_dir, a bin_dirs entry of the tier's, its state folder where the Pods'
 * network namespaces are mounted), and the chart's injector (a local process)
 * injects Pods of a namespace enforcing Pod Security `restricted` in CNI mode.
 * The agent's Pod needs the scheduler (scheduler.ts, for its label only):
 * until the test starts it, the node has no agent.
 *
 * 4. A workload started before the agent: its Pod's check exits 69 and the
 *    Pod does not run; once the agent is Ready it deletes the Pod (Event
 *    CaptureRepaired) and the ReplicaSet's replacement is captured.
 * 2. A restricted Pod, injected in CNI mode, starts (its check passes), and its
 *    outbound and inbound connections go through the stand-in.
 * 3a. The primary configuration rewritten as the primary CNI would: the agent
 *    appends its entry again, and a new Pod is captured.
 * 5. A Pod of a namespace that allows NET_ADMIN: CNI mode with `cni`,
 *    envoy-init with `auto`; captured either way.
 * 6. An IPv6-only Pod: the primary configuration rewritten as an IPv6-only
 *    network, a Pod made then starts, its check passing in IPv6; then the
 *    configuration written back.
 * 8. A Pod of a namespace with an OpenShift uid range (issue 53; no Pod
 *    Security label, so `auto` turns to CNI mode for the range alone): its
 *    proxy runs as the range's last uid (read from the process itself), its
 *    check as the one below, and its app, as another uid of the range (the
 *    first, what the SCC would give it), is still captured: outbound through
 *    the proxy, whose own connection out is let past by that uid.
 * 7. An API outage (kube-apiserver stopped with SIGSTOP): a static Pod of
 *    kube-system, which the kubelet starts without the API server, gets its
 *    network through the chain and runs: the agent never waits on the API
 *    for a Pod of a namespace the injector never captures (issue 50).
 * 3b. The DaemonSet deleted: the configuration is byte for byte what it was
 *    before the agent, the plugin gone.
 *
 * The variants, one per version: 1.36 runs proxy.capture.mode `cni` over the
 * node's `.conflist`; 1.34 runs `auto` over the same bridge written as a
 * single network, a `.conf` (which the agent chains as a `.conflist` of the
 * same name, and gives back at its stop).
 *
 * NODE_TIER_BREAK: cni-chain (the agent edits a decoy configuration folder:
 * its plugin is never called), cni-repair (the agent's ClusterRole without
 * `delete`), cni-rewrite (the agent's rounds after the first taken away,
 * through NODE_OPTIONS: setInterval does nothing), cni-uninstall (the
 * agent's process exits at once on SIGTERM, through NODE_OPTIONS: no stop),
 * cni-ipv6 (ip6tables a no-op on the agent's PATH, through NODE_OPTIONS: the
 * IPv6-only Pod gets IPv4 rules only and its check exits 69);
 * capture-rules (envoy-init without its OUTPUT jump: 5 with `auto`).
 */

const SOCKET_DIR = join(NODE_DIR, 'cni-agent');
const DECOY_CONF_DIR = join(NODE_DIR, 'cni-decoy');
const AGENT_LABEL = 'app.kubernetes.io/component=cni-agent';
const CAPTURE = { 'envoy-injector.io/capture': 'true', 'envoy-injector.io/capture-exclude-outbound-cidrs': `${NODE_IP}/32` };
const CHECK = 'envoy-capture-check';
/** An OpenShift namespace's uid range, as its controller writes them (scenario 8). */
const RANGE_FIRST = 1000620000;
const RANGE_LAST = RANGE_FIRST + 10000 - 1;
/** What NODE_TIER_BREAK takes from the agent's process, loaded before it: no round after the first, no stop on SIGTERM. */
const BREAK_OPTIONS: Readonly<Record<string, string>> = {
  'cni-rewrite': 'globalThis.setInterval=()=>0',
  'cni-uninstall': "process.on('SIGTERM',()=>process.exit(0))",
  // ip6tables a no-op on the PATH the rule script inherits (no spaces: NODE_OPTIONS splits on them): IPv4 rules only.
  'cni-ipv6': "import{mkdirSync,symlinkSync}from'node:fs';mkdirSync('/tmp/no-ip6tables',{recursive:true});['ip6tables-nft','ip6tables-legacy'].forEach((name)=>{try{symlinkSync('/bin/true','/tmp/no-ip6tables/'+name)}catch{}});process.env.PATH='/tmp/no-ip6tables:'+process.env.PATH",
};

/** An app Pod as `restricted` accepts it, captured, in NAMESPACE. */
function restrictedPod(name: string, namespace: string): V1Pod {
  const pod = appPod(name, CAPTURE, {
    automountServiceAccountToken: false,
    securityContext: { runAsNonRoot: true, runAsUser: 1000, runAsGroup: 1000, seccompProfile: { type: 'RuntimeDefault' } },
    containers: [appContainer(['--port', '8080'], { securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } })],
  });
  return { ...pod, metadata: { ...pod.metadata, namespace } };
}

/** The exit code of the check's last run, if it has ended. */
const checkExit = (pod: V1Pod): number | undefined => {
  const status = statuses(pod).get(CHECK);
  return status?.state?.terminated?.exitCode ?? status?.lastState?.terminated?.exitCode;
};

/** The plugins of the configuration the runtime picks (a single network: its one type). */
const chain = async (): Promise<string[]> => {
  const file = primaryConfigFile(await readdir(CNI_CONF_DIR)) ?? '';
  const parsed = JSON.parse(await readFile(join(CNI_CONF_DIR, file), 'utf8')) as { type?: string; plugins?: { type: string }[] };
  return parsed.plugins?.map((plugin) => plugin.type) ?? [parsed.type ?? ''];
};

/** The pid of the kube-apiserver serving SERVER (https://127.0.0.1:PORT): the one whose command line holds its port. */
function apiServerPid(server: string): number {
  const port = new URL(server).port;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const words = (() => {
      try {
        return readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0');
      } catch {
        return [];
      }
    })();
    // The binaries are cached as kube-apiserver-<hash>.
    if (basename(words[0] ?? '').startsWith('kube-apiserver') && words.includes(`--secure-port=${port}`)) return Number(entry);
  }
  throw new Error(`no kube-apiserver with --secure-port=${port}`);
}

interface Variant {
  readonly mode: 'cni' | 'auto';
  /** The primary CNI's file, as the primary CNI writes it. */
  readonly file: string;
  /** Its text; with an IPv6 subnet, the same bridge as an IPv6-only network. */
  text(ipv6Subnet?: string): string;
}
/** The bridge, IPv6-only: its host-local range a documentation prefix. */
const IPV6_SUBNET = '2001:db8:5100::/64';
function bridgeText(ipv6Subnet: string | undefined): Record<string, unknown> {
  const list = JSON.parse(cniConfig()) as { cniVersion: string; name: string; plugins: Record<string, unknown>[] };
  const bridge = list.plugins[0] ?? {};
  const ipam = bridge['ipam'] as Record<string, unknown>;
  return { cniVersion: list.cniVersion, name: list.name, plugin: ipv6Subnet === undefined ? bridge : { ...bridge, ipam: { ...ipam, ranges: [[{ subnet: ipv6Subnet }]] } } };
}
const VARIANTS: Readonly<Record<KubeVersion, Variant>> = {
  '1.36': {
    mode: 'cni',
    file: CNI_CONFLIST,
    text: (ipv6Subnet) => {
      if (ipv6Subnet === undefined) return cniConfig();
      const { cniVersion, name, plugin } = bridgeText(ipv6Subnet);
      return JSON.stringify({ cniVersion, name, plugins: [plugin] }, null, 2);
    },
  },
  '1.34': {
    mode: 'auto',
    file: CNI_CONFLIST.replace(/\.conflist$/, '.conf'),
    text: (ipv6Subnet) => {
      const { cniVersion, name, plugin } = bridgeText(ipv6Subnet);
      return `${JSON.stringify({ cniVersion, name, ...(plugin as Record<string, unknown>) }, null, 2)}\n`;
    },
  },
  '1.28': { mode: 'cni', file: CNI_CONFLIST, text: () => cniConfig() },
};

forEachNode('capture in CNI mode', (suite, version) => {
  const variant = VARIANTS[version];
  const restricted = uniqueName('restricted');
  const ip: Record<string, string> = {};
  let primaryBefore: Buffer | undefined;
  let scheduler: Scheduler | undefined;
  let earlyPod = '';
  let earlyState: V1Pod | undefined;
  const apps = (): AppsV1Api => suite().plane.kubeConfig.makeApiClient(AppsV1Api);
  const podsOf = async (namespace: string, labelSelector: string): Promise<V1Pod[]> => (await suite().core.listNamespacedPod({ namespace, labelSelector })).items;
  const waitIn = async (namespace: string, name: string, ready: (pod: V1Pod) => boolean, what: string, timeoutMs = 120_000): Promise<V1Pod> => {
    let last: V1Pod | undefined;
    return eventually(what, async () => {
      last = await suite().core.readNamespacedPod({ name, namespace });
      return ready(last) ? last : undefined;
    }, timeoutMs, 250).catch((error: Error) => {
      throw new Error(`${error.message}; Pod ${namespace}/${name} is ${describePod(last)}`);
    });
  };
  const agentLogs = async (): Promise<string> => {
    const release = suite().release;
    const [agent] = await podsOf(release?.namespace ?? '', AGENT_LABEL);
    if (agent === undefined) return 'no agent Pod';
    return suite().core.readNamespacedPodLog({ name: agent.metadata?.name ?? '', namespace: release?.namespace ?? '', container: 'cni-agent', tailLines: 20 }).catch((error: Error) => error.message);
  };

  before(async () => {
    const { plane, core, release, createPods } = suite();
    assert.ok(release !== undefined);
    for (const recipe of [await injectorRecipe(), await cniAgentRecipe()]) await importArchive((await buildImage(recipe)).archive);
    if (variant.file !== CNI_CONFLIST) {
      // The variant's primary configuration in place of the node's, before any Pod of this file.
      await writeFile(variant.file, variant.text());
      await rm(CNI_CONFLIST);
    }
    primaryBefore = await readFile(variant.file);
    if (broken() === 'cni-repair') {
      const rbac = plane.kubeConfig.makeApiClient(RbacAuthorizationV1Api);
      const name = release.manifests.find((manifest) => manifest.kind === 'ClusterRole' && manifest.metadata.name.endsWith('-cni-agent'))?.metadata.name ?? '';
      await rbac.patchClusterRole({ name, body: [{ op: 'replace', path: '/rules/0/verbs', value: ['get', 'list', 'watch'] }] });
    }
    await createNamespace(plane, restricted, { 'envoy-injector.io/inject': 'enabled', 'pod-security.kubernetes.io/enforce': 'restricted' });
    // 4: a workload whose Pod starts before the node has an agent.
    const early = restrictedPod('early', restricted);
    await apps().createNamespacedDeployment({
      namespace: restricted,
      body: { metadata: { name: 'early' }, spec: { replicas: 1, selector: { matchLabels: { app: 'early' } }, template: { metadata: { labels: { app: 'early' }, annotations: CAPTURE }, spec: early.spec ?? { containers: [] } } } },
    });
    const first = await eventually('the early workload\'s Pod', async () => (await podsOf(restricted, 'app=early'))[0], 60_000, 250);
    earlyPod = first.metadata?.name ?? '';
    earlyState = await waitIn(restricted, earlyPod, (pod) => checkExit(pod) === 69, 'the early Pod\'s check ending with 69 (no agent, no rules)');
    if (broken() === 'cni-chain') {
      await mkdir(DECOY_CONF_DIR, { recursive: true });
      await cp(variant.file, join(DECOY_CONF_DIR, basename(variant.file)));
    }
    // The agent: its Pod bound to the node now.
    scheduler = startScheduler(core, release.namespace, NODE_NAME, AGENT_LABEL);
    await eventually('the CNI agent Ready', async () => {
      const [agent] = await podsOf(release.namespace, AGENT_LABEL);
      return agent !== undefined && podReady(agent) ? agent : undefined;
    }, 120_000, 250).catch(async (error: Error) => {
      throw new Error(`${error.message}; its Pods: ${(await podsOf(release.namespace, AGENT_LABEL)).map(describePod).join(' | ')}; its log: ${await agentLogs()}`);
    });
    // 2: a server and a client outside the mesh, and the restricted Pod.
    const plain = { 'envoy-injector.io/inject': 'false' };
    // 5: a captured Pod where Pod Security allows envoy-init (the suite's namespace is `privileged`).
    await createPods([appPod('server', plain), appPod('client', plain), appPod('allowed', CAPTURE)]);
    await core.createNamespacedPod({ namespace: restricted, body: restrictedPod('captured', restricted) });
    for (const [namespace, name] of [[suite().namespace, 'server'], [suite().namespace, 'client'], [suite().namespace, 'allowed'], [restricted, 'captured']] as const) {
      const pod = await waitIn(namespace, name, (read) => read.status?.podIP !== undefined && running('app')(read), `Pod ${name} running with an IP`);
      ip[name] = pod.status?.podIP ?? '';
      await suite().recorder.waitFor(`the app of Pod ${name} listening`, name, (record) => record.source === 'app' && record.event === 'started');
    }
  });
  after(async () => {
    await scheduler?.stop();
    await deleteNamespaces(suite().plane, [restricted]);
    if (variant.file !== CNI_CONFLIST) {
      // The node's own configuration back for the files after this one (the agent, if still there, chains it and gives it back at its stop).
      await writeFile(CNI_CONFLIST, cniConfig());
      await rm(variant.file, { force: true });
    }
  });

  it(`4. a Pod started before the agent was ready: its check exited 69, the agent deleted it (CaptureRepaired), the replacement is captured (${version})`, async () => {
    const { core } = suite();
    // Uncaptured, it never ran: the check stops it before the proxy and the app.
    for (const name of ['envoy', 'app']) assert.equal(statuses(earlyState ?? {}).get(name)?.state?.running, undefined, describePod(earlyState));
    const events = await eventually('the CaptureRepaired Event on the early Pod', async () => {
      const found = (await core.listNamespacedEvent({ namespace: restricted })).items.filter((event) => event.reason === 'CaptureRepaired' && event.involvedObject.name === earlyPod);
      return found.length > 0 ? found : undefined;
    }, 60_000, 250).catch(async (error: Error) => {
      throw new Error(`${error.message}; the agent's log: ${await agentLogs()}`);
    });
    assert.equal(events[0]?.type, 'Warning');
    const replacement = await eventually('the early workload\'s replacement Pod', async () =>
      (await podsOf(restricted, 'app=early')).find((pod) => pod.metadata?.name !== earlyPod && pod.metadata?.deletionTimestamp === undefined), 60_000, 250);
    const pod = await waitIn(restricted, replacement.metadata?.name ?? '', running('envoy', 'app'), 'the replacement running with its proxy');
    assert.equal(checkExit(pod), 0, describePod(pod));
    assert.equal(statuses(pod).get(CHECK)?.restartCount, 0, describePod(pod));
  });

  it(`2. a Pod of a namespace enforcing restricted, injected in CNI mode: its check passes, outbound and inbound go through the proxy (${version})`, async () => {
    const { core, recorder } = suite();
    const pod = await core.readNamespacedPod({ name: 'captured', namespace: restricted });
    const names = (pod.spec?.initContainers ?? []).map((container) => container.name);
    assert.ok(names.includes(CHECK) && !names.includes('envoy-init'), `init containers: ${names.join(', ')}`);
    assert.equal(JSON.parse(pod.metadata?.annotations?.['envoy-injector.io/status'] ?? '{}').captureMode, 'cni');
    assert.equal(checkExit(pod), 0, describePod(pod));
    const server = ip['server'] ?? '';
    const captured = ip['captured'] ?? '';
    const outbound = await askToCall(captured, `${server}:8080`);
    assert.equal(outbound.status, 200, outbound.body);
    await waitRelayed(recorder, 'captured', 'outbound', [server, 8080]);
    const inbound = await askToCall(ip['client'] ?? '', `${captured}:8080`);
    assert.equal(inbound.status, 200, inbound.body);
    // The app saw the proxy (its own address) as its peer: the connection came through 15006.
    assert.match(inbound.body, new RegExp(`from ${captured.replaceAll('.', '\\.')}$`));
    await waitRelayed(recorder, 'captured', 'inbound', [captured, 8080]);
  });

  it(`3a. the primary configuration rewritten as its CNI writes it: the agent chains its plugin again, and a new Pod is captured (${version})`, async () => {
    const { core, recorder } = suite();
    await writeFile(variant.file, variant.text());
    assert.deepEqual(await chain(), ['bridge']);
    await eventually('the agent\'s entry back in the chain', async () => ((await chain()).includes(CNI_PLUGIN_TYPE) ? true : undefined), 20_000, 100);
    await core.createNamespacedPod({ namespace: restricted, body: restrictedPod('after-rewrite', restricted) });
    const pod = await waitIn(restricted, 'after-rewrite', (read) => read.status?.podIP !== undefined && running('app')(read), 'the Pod made after the rewrite running');
    assert.equal(checkExit(pod), 0, describePod(pod));
    await recorder.waitFor('the app of Pod after-rewrite listening', 'after-rewrite', (record) => record.source === 'app' && record.event === 'started');
    const server = ip['server'] ?? '';
    assert.equal((await askToCall(pod.status?.podIP ?? '', `${server}:8080`)).status, 200);
    await waitRelayed(recorder, 'after-rewrite', 'outbound', [server, 8080]);
  });

  it(`5. a Pod of a namespace that allows NET_ADMIN, in mode ${variant.mode}: ${variant.mode === 'auto' ? 'envoy-init' : 'the check'} captures it, outbound through the proxy (${version})`, async () => {
    const { recorder } = suite();
    const pod = await suite().readPod('allowed');
    const names = (pod.spec?.initContainers ?? []).map((container) => container.name);
    const status = JSON.parse(pod.metadata?.annotations?.['envoy-injector.io/status'] ?? '{}') as { captureMode?: string };
    if (variant.mode === 'auto') {
      assert.ok(names.includes('envoy-init') && !names.includes(CHECK), `auto chose envoy-init where Pod Security allows it; init containers: ${names.join(', ')}`);
      assert.equal(status.captureMode, undefined);
      assert.equal(statuses(pod).get('envoy-init')?.state?.terminated?.exitCode, 0, describePod(pod));
    } else {
      assert.ok(names.includes(CHECK) && !names.includes('envoy-init'), `init containers: ${names.join(', ')}`);
      assert.equal(status.captureMode, 'cni');
      assert.equal(checkExit(pod), 0, describePod(pod));
    }
    const server = ip['server'] ?? '';
    const outbound = await askToCall(ip['allowed'] ?? '', `${server}:8080`);
    assert.equal(outbound.status, 200, outbound.body);
    await waitRelayed(recorder, 'allowed', 'outbound', [server, 8080]);
  });

  it(`8. a Pod of a namespace with an OpenShift uid range: the proxy as its last uid, the app as its first still captured (${version})`, async () => {
    const { core, recorder, plane } = suite();
    const ranged = uniqueName('openshift');
    await createNamespace(plane, ranged, { 'envoy-injector.io/inject': 'enabled' }, { 'openshift.io/sa.scc.uid-range': `${RANGE_FIRST}/10000`, 'openshift.io/sa.scc.supplemental-groups': `${RANGE_FIRST}/10000` });
    try {
      const pod = appPod('ranged', CAPTURE, {
        automountServiceAccountToken: false,
        // What restricted-v2 gives a container without a user: the range's first id.
        securityContext: { runAsNonRoot: true, runAsUser: RANGE_FIRST, runAsGroup: RANGE_FIRST, seccompProfile: { type: 'RuntimeDefault' } },
        containers: [appContainer(['--port', '8080'], { securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } } })],
      });
      await core.createNamespacedPod({ namespace: ranged, body: { ...pod, metadata: { ...pod.metadata, namespace: ranged } } });
      const started = await waitIn(ranged, 'ranged', (read) => read.status?.podIP !== undefined && running('envoy', 'app')(read), 'the ranged Pod running with its proxy');
      const envoy = [...(started.spec?.initContainers ?? []), ...(started.spec?.containers ?? [])].find((container) => container.name === 'envoy');
      assert.deepEqual([envoy?.securityContext?.runAsUser, envoy?.securityContext?.runAsGroup], [RANGE_LAST, RANGE_LAST]);
      const check = (started.spec?.initContainers ?? []).find((container) => container.name === CHECK);
      assert.equal(check?.securityContext?.runAsUser, RANGE_LAST - 1);
      assert.ok(check?.args?.includes(`--proxy-uid=${RANGE_LAST}`), JSON.stringify(check?.args));
      assert.ok(!(started.spec?.initContainers ?? []).some((container) => container.name === 'envoy-init'));
      assert.equal(checkExit(started), 0, describePod(started));
      // The proxy's process itself runs as the range's last uid.
      const crictl = async (...args: string[]): Promise<string> => (await promisify(execFile)(await kubeBinary('crictl', version), ['--runtime-endpoint', `unix://${CONTAINERD_SOCKET}`, ...args])).stdout.trim();
      const sandbox = (await crictl('pods', '--namespace', ranged, '--name', 'ranged', '--state', 'ready', '-q')).split('\n')[0] ?? '';
      const uidOf = async (name: string): Promise<string> => {
        const id = (await crictl('ps', '--pod', sandbox, '--name', `^${name}$`, '--state', 'running', '-q')).split('\n')[0] ?? '';
        const pid = (JSON.parse(await crictl('inspect', id)) as { info?: { pid?: number } }).info?.pid ?? 0;
        return /^Uid:\s+(\d+)/m.exec(await readFile(`/proc/${pid}/status`, 'utf8'))?.[1] ?? '';
      };
      assert.equal(await uidOf('envoy'), String(RANGE_LAST));
      assert.equal(await uidOf('app'), String(RANGE_FIRST));
      await recorder.waitFor('the app of Pod ranged listening', 'ranged', (record) => record.source === 'app' && record.event === 'started');
      const server = ip['server'] ?? '';
      const outbound = await askToCall(started.status?.podIP ?? '', `${server}:8080`);
      assert.equal(outbound.status, 200, outbound.body);
      await waitRelayed(recorder, 'ranged', 'outbound', [server, 8080]);
    } finally {
      await deleteNamespaces(plane, [ranged]);
    }
  });

  it(`6. an IPv6-only Pod: made while the primary configuration is an IPv6-only network, it starts, its check passing in IPv6 (${version})`, async () => {
    const { core } = suite();
    await writeFile(variant.file, variant.text(IPV6_SUBNET));
    await eventually('the agent\'s entry in the IPv6-only configuration', async () => ((await chain()).includes(CNI_PLUGIN_TYPE) && (await readFile(join(CNI_CONF_DIR, primaryConfigFile(await readdir(CNI_CONF_DIR)) ?? ''), 'utf8')).includes(IPV6_SUBNET) ? true : undefined), 20_000, 100);
    try {
      await core.createNamespacedPod({ namespace: restricted, body: restrictedPod('ipv6-only', restricted) });
      // Its proxy and app need not serve (the stand-in and the recorder speak IPv4): what is proven is that the Pod runs past its check.
      const pod = await waitIn(restricted, 'ipv6-only', (read) => checkExit(read) !== undefined && (checkExit(read) !== 0 || running('envoy')(read)), 'the IPv6-only Pod\'s check ended (and, passed, its proxy started)').catch(async (error: Error) => {
        throw new Error(`${error.message}; the agent's log: ${await agentLogs()}`);
      });
      assert.ok((pod.status?.podIPs ?? []).every((entry) => entry.ip.includes(':')) && (pod.status?.podIPs ?? []).length > 0, `an IPv6 address only: ${JSON.stringify(pod.status?.podIPs)}`);
      assert.equal(checkExit(pod), 0, describePod(pod));
      assert.equal(statuses(pod).get(CHECK)?.restartCount, 0, describePod(pod));
    } finally {
      await core.deleteNamespacedPod({ name: 'ipv6-only', namespace: restricted, gracePeriodSeconds: 0 }).catch(() => undefined);
      await writeFile(variant.file, variant.text());
      await eventually('the agent\'s entry back in the IPv4 configuration', async () => ((await chain()).includes(CNI_PLUGIN_TYPE) && !(await readFile(join(CNI_CONF_DIR, primaryConfigFile(await readdir(CNI_CONF_DIR)) ?? ''), 'utf8')).includes(IPV6_SUBNET) ? true : undefined), 20_000, 100);
    }
  });

  it(`7. an API outage: a static Pod of kube-system, started by the kubelet while kube-apiserver is stopped, gets its network and runs (${version})`, async () => {
    const crictl = async (...args: string[]): Promise<string> =>
      (await promisify(execFile)(await kubeBinary('crictl', version), ['--runtime-endpoint', `unix://${CONTAINERD_SOCKET}`, ...args])).stdout.trim();
    const manifest = join(STATIC_POD_DIR, 'outage-static.json');
    const pod = { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'outage-static', namespace: 'kube-system' }, spec: { terminationGracePeriodSeconds: 5, containers: [appContainer()] } };
    const pid = apiServerPid(suite().plane.server);
    try {
      process.kill(pid, 'SIGSTOP');
      try {
        await writeFile(manifest, JSON.stringify(pod));
        // A sandbox ready is a network set up: the chain, our plugin last, answered "go" (with the API stopped).
        const sandbox = await eventually('the static Pod\'s sandbox ready while kube-apiserver is stopped', async () => (await crictl('pods', '--namespace', 'kube-system', '--name', 'outage-static', '--state', 'ready', '-q')).split('\n')[0] || undefined, 90_000, 500).catch(async (error: Error) => {
          throw new Error(`${error.message}; the sandboxes: ${await crictl('pods', '--namespace', 'kube-system', '--name', 'outage-static').catch((failed: Error) => failed.message)}`);
        });
        await eventually('its app running', async () => ((await crictl('ps', '--pod', sandbox, '--name', 'app', '--state', 'running', '-q')) === '' ? undefined : true), 60_000, 500);
      } finally {
        process.kill(pid, 'SIGCONT');
      }
      // The API server back: the kubelet's mirror Pod says the same.
      await waitIn('kube-system', `outage-static-${NODE_NAME}`, running('app'), 'the static Pod\'s mirror Pod running', 90_000).catch(async (error: Error) => {
        throw new Error(`${error.message}; the agent's log: ${await agentLogs()}`);
      });
    } finally {
      await rm(manifest, { force: true });
    }
    await eventually('the static Pod gone', async () => ((await crictl('pods', '--namespace', 'kube-system', '--name', 'outage-static', '--state', 'ready', '-q')) === '' ? true : undefined), 60_000, 500);
  });

  it(`3b. the DaemonSet deleted: the node's CNI configuration is as it was, byte for byte, the plugin gone (${version})`, async () => {
    const release = suite().release;
    assert.ok(release !== undefined && primaryBefore !== undefined);
    const name = release.manifests.find((manifest) => manifest.kind === 'DaemonSet')?.metadata.name ?? '';
    await apps().deleteNamespacedDaemonSet({ name, namespace: release.namespace });
    await eventually('the agent\'s Pods gone', async () => ((await podsOf(release.namespace, AGENT_LABEL)).length === 0 ? true : undefined), 90_000, 250);
    assert.equal((await readFile(variant.file)).toString('utf8'), primaryBefore.toString('utf8'));
    assert.ok((await readFile(variant.file)).equals(primaryBefore), 'the same bytes');
    assert.deepEqual(await readdir(CNI_CONF_DIR), [basename(variant.file)], 'no other file left in the configuration folder');
    assert.equal((await readdir(CNI_BIN_DIR)).includes(CNI_PLUGIN_TYPE), false, 'the plugin is still in the binary folder');
  });
}, {
  values: (plane) => {
    const api = new URL(plane.server);
    return {
      proxy: { capture: { mode: VARIANTS[plane.version].mode } },
      cniAgent: {
        binDir: CNI_BIN_DIR,
        confDir: broken() === 'cni-chain' ? DECOY_CONF_DIR : CNI_CONF_DIR,
        socketDir: SOCKET_DIR,
        netnsDir: CONTAINERD_STATE_DIR,
        // Host network: the API server on the host's loopback (there is no kube-proxy for the kubernetes Service).
        extraEnv: [
          { name: 'KUBERNETES_SERVICE_HOST', value: api.hostname },
          { name: 'KUBERNETES_SERVICE_PORT', value: api.port },
          ...(BREAK_OPTIONS[broken() ?? ''] === undefined ? [] : [{ name: 'NODE_OPTIONS', value: `--import=data:text/javascript,${BREAK_OPTIONS[broken() ?? ''] ?? ''}` }]),
        ],
      },
    };
  },
});
