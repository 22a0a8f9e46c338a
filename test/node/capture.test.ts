import assert from 'node:assert/strict';
import { readFile } from 'node:fs/promises';
import { request } from 'node:http';
import { after, before, it } from 'node:test';
import { AdmissionregistrationV1Api, type V1Container, type V1Pod } from '@kubernetes/client-node';
import { eventually, uniqueName } from '../e2e/cluster.js';
import { startOptInWebhook, type OptInWebhook, type Review } from '../e2e/opt-in-webhook.js';
import type { JsonObject } from '../../src/injection/index.js';
import { kubeCall, warningText } from '../e2e/policy-parity.js';
import { APP_IMAGE } from './image-recipes.js';
import { appContainer, appPod, broken, describePod, forEachNode, podReady, running, statuses, type NodeSuite } from './node-suite.js';
import { KUBELET_LOG } from './kubelet.js';
import { NODE_IP, RECORDER_PORT } from './network.js';
import { askToCall, relayed, waitRelayed } from './traffic.js';

/**
 * Traffic capture on a real kubelet (issue 36, scenarios 5 and 7): envoy-init
 * built from init/Dockerfile's recipe installs the rules in the Pod's network
 * namespace, and the stand-in (tagged as the chart's Envoy) records each
 * connection its listeners take with the connection's original destination.
 * Calls are made by the apps themselves (GET /call?target=...), asked by the
 * test over the Pod network.
 *
 * Scenario 6 (the Vault-agent case): a second webhook, registered after the
 * chart's as another injector is, puts an init container that calls a server
 * first in the Pod (as Vault's agent-init-first does); the API server
 * reinvokes the injector, which puts envoy-init and the proxy back in front
 * (issue 34), so that the agent's connection goes through the running proxy.
 * Scenario 8: an app running as the proxy's uid (1337): its connections go
 * past the proxy, and the API server hands the client the injector's warning.
 * Scenario 9 (issue 41): a captured and an uncaptured Pod's tcpSocket probes
 * fail alike when the app's port is closed. Scenario 10 (issue 41): with the
 * PROXY protocol on a port, the app reads the client Pod's own address from
 * the header the proxy sends first. Scenario 11 (issue 41): in TPROXY mode
 * (envoy-injector.io/capture-interception: tproxy, which the suite's namespace
 * allows by its label envoy-injector.io/allow-tproxy: "true") the app sees the client
 * Pod's own address on every captured port, the proxy (root, NET_ADMIN only) relays
 * through its transparent listener from the client's address, and the app's
 * outbound connections still go through the proxy.
 *
 * NODE_TIER_BREAK: capture-rules builds envoy-init without the OUTPUT jump;
 * init-order sets the chart's webhooks to `reinvocationPolicy: Never` (no
 * reinvocation, the agent's init container stays first); proxy-uid runs
 * scenario 8's app as uid 1338 instead of the proxy's; tcp-probes annotates
 * the captured probe Pod envoy-injector.io/rewrite-tcp-probes: "false" (its
 * tcpSocket probes as written); proxy-protocol leaves scenario 10's Pod without
 * its envoy-injector.io/inbound-proxy-protocol annotation (no header);
 * tproxy-restore builds envoy-init without TPROXY's mangle OUTPUT restore of
 * the mark (the app's replies leave the Pod: scenario 11's call fails);
 * tproxy-allow leaves the namespace without its allowance (scenario 11's Pod
 * is captured by REDIRECT, with a warning).
 */
const CAPTURE = {
  'envoy-injector.io/capture': 'true',
  // The node's address (the recorder, which the apps report to) and one port go around the proxy.
  'envoy-injector.io/capture-exclude-outbound-cidrs': `${NODE_IP}/32`,
  'envoy-injector.io/capture-exclude-outbound-ports': '8081',
};
const probe = { httpGet: { path: '/', port: 8080 }, periodSeconds: 1, failureThreshold: 3 };
// The liveness probe counts only once the app has started: Python takes seconds to listen on a loaded machine.
const startupProbe = { ...probe, failureThreshold: 120 };

/**
 * Scenario 9 (issue 41): tcpSocket probes mean what they say. The app listens on
 * 8080 (its startupProbe) and 8082 (named "live", its livenessProbe); its
 * readinessProbe asks for 8081, where nothing listens until the test asks
 * the app to open it; asked to close 8082 the app lives on but stops
 * accepting there, as a hung app does.
 */
const probeContainer = appContainer(['--port', '8080', '--port', '8082'], {
  ports: [{ name: 'live', containerPort: 8082 }],
  startupProbe: { tcpSocket: { port: 8080 }, periodSeconds: 1, failureThreshold: 120 },
  readinessProbe: { tcpSocket: { port: 8081 }, periodSeconds: 1, failureThreshold: 1 },
  livenessProbe: { tcpSocket: { port: 'live' }, periodSeconds: 1, failureThreshold: 2 },
});
const PROBE_PODS = {
  'probes-captured': { ...CAPTURE, ...(broken() === 'tcp-probes' ? { 'envoy-injector.io/rewrite-tcp-probes': 'false' } : {}) },
  'probes-uncaptured': { 'envoy-injector.io/capture': 'false' },
} as const;

/**
 * Scenario 10 (issue 41): the app reads a PROXY protocol v1 header on 8083 (as
 * nginx's `listen 8083 proxy_protocol` does) and answers with the client it
 * names; the Pod asks the proxy to send it there.
 */
const PROXY_PROTOCOL_POD = appPod(
  'proxy-protocol',
  { ...CAPTURE, ...(broken() === 'proxy-protocol' ? {} : { 'envoy-injector.io/inbound-proxy-protocol': '8083' }) },
  { containers: [appContainer(['--port', '8080', '--proxy-protocol-port', '8083'], { startupProbe })] },
);

/** Scenario 11 (issue 41): TPROXY interception, chosen by the Pod. */
const TPROXY_POD = appPod('tproxy', { ...CAPTURE, 'envoy-injector.io/capture-interception': 'tproxy' }, { containers: [appContainer(['--port', '8080'], { startupProbe })] });

/** GET http://HOST:8080PATH from the test: the app's answer. */
function askApp(host: string, path: string): Promise<number> {
  return new Promise((resolve, reject) => {
    const call = request({ host, port: 8080, path, timeout: 10_000 }, (response) => {
      response.resume().on('end', () => resolve(response.statusCode ?? 0));
    });
    call.once('timeout', () => call.destroy(new Error(`GET ${host}:8080${path}: no answer in 10 s`)));
    call.once('error', reject);
    call.end();
  });
}

/**
 * Whether the kubelet says POD's PROBE (readiness, liveness) of its app failed:
 * an `Unhealthy` or `Killing` Event, or its own log line (`--v=1`). The log is
 * the evidence to count on: the kubelet's recorder drops a Pod's Events past
 * a burst of 25 (its spam filter), and the proxy's and the app's startup
 * probes can spend that burst on a loaded machine before the readiness probe
 * has failed once.
 */
async function kubeletSaysProbeFailed(suite: NodeSuite, pod: string, probe: 'readiness' | 'liveness'): Promise<string | undefined> {
  const events = await suite.core.listNamespacedEvent({ namespace: suite.namespace, fieldSelector: `involvedObject.name=${pod}` });
  const [reason, text] = probe === 'readiness' ? ['Unhealthy', 'Readiness probe failed'] : ['Killing', 'failed liveness probe'];
  const event = events.items.find((item) => item.reason === reason && (item.message ?? '').includes(text));
  if (event !== undefined) return `Event ${reason}: ${event.message ?? ''}`;
  const logged = probe === 'readiness'
    ? `"Probe failed" probeType="Readiness" pod="${suite.namespace}/${pod}"`
    : `"SyncLoop (probe)" probe="liveness" status="unhealthy" pod="${suite.namespace}/${pod}"`;
  const line = (await readFile(KUBELET_LOG, 'utf8')).split('\n').find((entry) => entry.includes(logged) && (probe === 'liveness' || entry.includes('containerName="app"')));
  return line === undefined ? undefined : `the kubelet's log: ${line}`;
}

/** The agent's init container: one call to TARGET (app.py's traced_call, recorded), exit 0 if it answered, else 3. */
const AGENT = 'vault-agent-init';
const AGENT_ANNOTATION = 'node-tier.envoy-injector.io/agent-init';
const agentInit = (target: string): V1Container => ({
  name: AGENT,
  image: APP_IMAGE,
  imagePullPolicy: 'IfNotPresent',
  command: ['python3', '-c', 'import sys; sys.path.insert(0, "/app"); from app import traced_call; from record import exit_now; exit_now(0 if traced_call(sys.argv[1], "init")[0] else 3)', target],
});

/** The other injector: prepends the agent's init container to a Pod annotated for it (once). */
const prependAgent = (target: string) => (review: Review): readonly object[] | undefined => {
  const object = review.request?.object;
  if (object?.metadata?.annotations?.[AGENT_ANNOTATION] !== 'true') return undefined;
  const list = object.spec?.initContainers;
  if (list?.some((container) => container.name === AGENT)) return undefined;
  return list === undefined ? [{ op: 'add', path: '/spec/initContainers', value: [agentInit(target)] }] : [{ op: 'add', path: '/spec/initContainers/0', value: agentInit(target) }];
};

const PROXY_UID = 1337;

forEachNode('traffic capture', (suite, version) => {
  const ip: Record<string, string> = {};
  let other: OptInWebhook | undefined;
  let uidWarnings: string[] = [];
  after(async () => {
    await other?.stop();
  });
  before(async () => {
    const { createPods, recorder, waitPod } = suite();
    const plain = { 'envoy-injector.io/inject': 'false' };
    await createPods([
      appPod('server', plain, { containers: [appContainer(['--port', '8080', '--port', '8081'])] }),
      appPod('client', plain),
      appPod('captured', CAPTURE, { containers: [appContainer(['--port', '8080'], { startupProbe, readinessProbe: probe, livenessProbe: probe })] }),
      appPod('uncaptured', { 'envoy-injector.io/capture': 'false' }),
      appPod('userns', CAPTURE, { hostUsers: false }),
      ...Object.entries(PROBE_PODS).map(([name, annotations]) => appPod(name, annotations, { containers: [probeContainer] })),
      PROXY_PROTOCOL_POD,
      TPROXY_POD,
    ]);
    for (const name of ['server', 'client', 'captured', 'uncaptured', 'proxy-protocol', 'tproxy']) {
      const pod = await waitPod(name, (read) => read.status?.podIP !== undefined && running('app')(read), `Pod ${name} running with an IP`);
      ip[name] = pod.status?.podIP ?? '';
      // Running is not listening yet: the app records `started` once its ports are open.
      await recorder.waitFor(`the app of Pod ${name} listening`, name, (record) => record.source === 'app' && record.event === 'started');
    }
    await startScenarios6And8();
  });

  /** Scenario 6's other injector and Pod, scenario 8's Pod (created through a raw call, for the API server's Warning headers). */
  const startScenarios6And8 = async (): Promise<void> => {
    const { plane, namespace, release, createPods } = suite();
    if (broken() === 'init-order') {
      const name = release?.manifests.find((manifest) => manifest.kind === 'MutatingWebhookConfiguration')?.metadata.name ?? '';
      const admission = plane.kubeConfig.makeApiClient(AdmissionregistrationV1Api);
      const config = await admission.readMutatingWebhookConfiguration({ name });
      await admission.patchMutatingWebhookConfiguration({ name, body: (config.webhooks ?? []).map((_, index) => ({ op: 'replace', path: `/webhooks/${index}/reinvocationPolicy`, value: 'Never' })) });
    }
    other = await startOptInWebhook(plane, uniqueName('zz-agent'), { 'kubernetes.io/metadata.name': namespace }, prependAgent(`${ip['server'] ?? ''}:8080`));
    const uid = broken() === 'proxy-uid' ? PROXY_UID + 1 : PROXY_UID;
    const asProxy = appPod('proxy-uid', CAPTURE, { containers: [appContainer(['--port', '8080'], { securityContext: { runAsUser: uid, runAsGroup: uid } })] });
    const [, created] = await Promise.all([
      createPods([appPod('agent', { ...CAPTURE, [AGENT_ANNOTATION]: 'true' })]),
      kubeCall(plane, 'POST', `/api/v1/namespaces/${namespace}/pods`, asProxy as JsonObject),
    ]);
    assert.equal(created.status, 201, `Pod proxy-uid: ${String(created.body['message'])}`);
    uidWarnings = created.warnings.map(warningText);
  };

  it(`5a. the captured app's outbound connection to another Pod goes through the proxy's outbound listener (${version})`, async () => {
    const { recorder } = suite();
    const server = ip['server'] ?? '';
    const answer = await askToCall(ip['captured'] ?? '', `${server}:8080`);
    assert.equal(answer.status, 200, answer.body);
    assert.match(answer.body, new RegExp(`^app server ${server.replaceAll('.', '\\.')} 8080 from ${(ip['captured'] ?? '').replaceAll('.', '\\.')}$`));
    // The stand-in's outbound listener took the connection, with the server as its original destination.
    await waitRelayed(recorder, 'captured', 'outbound', [server, 8080]);
  });

  it(`5b. a connection from another Pod comes in through the inbound listener (15006) (${version})`, async () => {
    const { recorder } = suite();
    const captured = ip['captured'] ?? '';
    const answer = await askToCall(ip['client'] ?? '', `${captured}:8080`);
    assert.equal(answer.status, 200, answer.body);
    // The app saw the proxy (its own address) as its peer, not the client: the connection went through 15006.
    assert.match(answer.body, new RegExp(`^app captured ${captured.replaceAll('.', '\\.')} 8080 from ${captured.replaceAll('.', '\\.')}$`));
    const inbound = await eventually('the inbound listener recording the client\'s connection', async () => {
      const found = recorder.of('captured', 'stand-in', 'relayed').filter((record) => record['listener'] === 'inbound' && record['peer'] === ip['client']);
      return found.length > 0 ? found : undefined;
    }, 15_000);
    assert.equal(inbound[0]?.['port'], 15006);
    assert.deepEqual(inbound[0]?.['original'], [captured, 8080]);
  });

  it(`5c. excluded ports and CIDRs go around the proxy (${version})`, async () => {
    const { recorder } = suite();
    const server = ip['server'] ?? '';
    const captured = ip['captured'] ?? '';
    const before = relayed(recorder, 'captured', 'outbound', [server, 8080]);
    const port = await askToCall(captured, `${server}:8081`);
    assert.equal(port.status, 200, port.body);
    assert.match(port.body, new RegExp(`8081 from ${captured.replaceAll('.', '\\.')}$`));
    const cidr = await askToCall(captured, `${NODE_IP}:${RECORDER_PORT}`);
    assert.equal(cidr.status, 200, cidr.body);
    assert.equal(cidr.body, `recorder ${NODE_IP} ${RECORDER_PORT} from ${captured}`);
    // A captured call after them: once its record is in, theirs would be too (one stand-in sends its records in order).
    assert.equal((await askToCall(captured, `${server}:8080`)).status, 200);
    await waitRelayed(recorder, 'captured', 'outbound', [server, 8080], before + 1);
    assert.equal(relayed(recorder, 'captured', 'outbound', [server, 8081]), 0, 'port 8081 is excluded: the proxy saw no connection to it');
    assert.equal(relayed(recorder, 'captured', 'outbound', [NODE_IP, RECORDER_PORT]), 0, `${NODE_IP}/32 is excluded: the proxy saw no connection to it`);
  });

  it(`5d. the kubelet's httpGet probes of the captured app pass, through the proxy (${version})`, async () => {
    const { recorder, waitPod } = suite();
    const captured = ip['captured'] ?? '';
    await eventually('three of the kubelet\'s probes relayed by the inbound listener', async () =>
      recorder.of('captured', 'stand-in', 'relayed').filter((record) => record['listener'] === 'inbound' && record['peer'] === NODE_IP).length >= 3 ? true : undefined, 30_000);
    const pod = await waitPod('captured', podReady, 'the captured Pod Ready');
    const inbound = recorder.of('captured', 'stand-in', 'relayed').find((record) => record['listener'] === 'inbound' && record['peer'] === NODE_IP);
    assert.deepEqual(inbound?.['original'], [captured, 8080]);
    assert.equal(statuses(pod).get('app')?.restartCount, 0, `the liveness probe never failed: ${describePod(pod)}`);
    assert.equal(statuses(pod).get('envoy-init')?.state?.terminated?.exitCode, 0, describePod(pod));
  });

  it(`5e. an injected Pod with capture off next to it is untouched (${version})`, async () => {
    const { recorder, readPod } = suite();
    const pod: V1Pod = await readPod('uncaptured');
    assert.ok(pod.spec?.initContainers?.some((container) => container.name === 'envoy'), 'the Pod has the proxy');
    assert.ok(!pod.spec?.initContainers?.some((container) => container.name === 'envoy-init'), 'but no envoy-init');
    const server = ip['server'] ?? '';
    const answer = await askToCall(ip['uncaptured'] ?? '', `${server}:8080`);
    assert.equal(answer.status, 200, answer.body);
    assert.match(answer.body, new RegExp(`from ${(ip['uncaptured'] ?? '').replaceAll('.', '\\.')}$`));
    // Its proxy's next record (the kubelet's readiness probe, every 5 s) comes after any of that call's would have.
    const asked = Date.now() / 1000;
    await recorder.waitFor('a record of the uncaptured Pod\'s stand-in after the call', 'uncaptured', (record) => record.source === 'stand-in' && record.time > asked, 20_000);
    assert.equal(recorder.of('uncaptured', 'stand-in', 'relayed').length, 0, 'its proxy took no connection');
  });

  it(`7. hostUsers: false: capture works in a Pod with its own user namespace (${version})`, async () => {
    const { recorder, waitPod } = suite();
    const pod = await waitPod('userns', (read) => read.status?.podIP !== undefined && running('app')(read), 'the hostUsers: false Pod running');
    assert.equal(pod.spec?.hostUsers, false);
    assert.equal(statuses(pod).get('envoy-init')?.state?.terminated?.exitCode, 0, `envoy-init installed its rules: ${describePod(pod)}`);
    await recorder.waitFor('the app of Pod userns listening', 'userns', (record) => record.source === 'app' && record.event === 'started');
    const server = ip['server'] ?? '';
    const answer = await askToCall(pod.status?.podIP ?? '', `${server}:8080`);
    assert.equal(answer.status, 200, answer.body);
    // The stand-in's outbound listener took the connection: the rules hold in the user namespace.
    await waitRelayed(recorder, 'userns', 'outbound', [server, 8080]);
  });

  it(`6. an init container another webhook put first (the Vault-agent case) reaches its server through the proxy, native mode (${version})`, async () => {
    const { recorder, waitPod } = suite();
    const server = ip['server'] ?? '';
    const pod = await waitPod('agent', running('envoy', 'app'), 'the agent Pod running after its init containers');
    assert.equal(statuses(pod).get(AGENT)?.state?.terminated?.exitCode, 0, `the agent's call to ${server}:8080 failed: ${describePod(pod)}`);
    const call = await recorder.waitFor('the agent\'s call', 'agent', (record) => record.source === 'app' && record.event === 'call' && record['why'] === 'init');
    assert.equal(call['ok'], true, String(call['error']));
    // It went through the proxy: the stand-in's outbound listener relayed it to its original destination.
    await waitRelayed(recorder, 'agent', 'outbound', [server, 8080]);
    const names = (pod.spec?.initContainers ?? []).map((container) => container.name);
    assert.deepEqual(names, ['envoy-init', 'envoy', AGENT], 'the reinvoked injector put envoy-init and the proxy before the agent');
    assert.equal(pod.spec?.initContainers?.[1]?.restartPolicy, 'Always', 'the proxy is a native sidecar');
  });

  it(`8. an app running as the proxy's uid goes past the proxy, and the API server hands the client the injector's warning (${version})`, async () => {
    const { recorder, waitPod } = suite();
    const pod = await waitPod('proxy-uid', (read) => read.status?.podIP !== undefined && running('envoy', 'app')(read), 'the proxy-uid Pod running with an IP');
    assert.equal(statuses(pod).get('envoy-init')?.state?.terminated?.exitCode, 0, describePod(pod));
    await recorder.waitFor('the app of Pod proxy-uid listening', 'proxy-uid', (record) => record.source === 'app' && record.event === 'started');
    const own = pod.status?.podIP ?? '';
    const server = ip['server'] ?? '';
    const answer = await askToCall(own, `${server}:8080`);
    assert.equal(answer.status, 200, answer.body);
    assert.match(answer.body, new RegExp(`from ${own.replaceAll('.', '\\.')}$`));
    // Its proxy's next record (the kubelet's readiness probe) comes after any of that call's would have.
    const asked = Date.now() / 1000;
    await recorder.waitFor('a record of the proxy-uid Pod\'s stand-in after the call', 'proxy-uid', (record) => record.source === 'stand-in' && record.time > asked, 20_000);
    assert.equal(relayed(recorder, 'proxy-uid', 'outbound', [server, 8080]), 0, `uid ${PROXY_UID}'s connection went past the proxy: the rules let the proxy's user out`);
    const warning = `container "app" runs as user ${PROXY_UID} (its securityContext.runAsUser), the proxy's uid`;
    assert.ok(uidWarnings.some((text) => text.includes(warning)), `a Warning header saying ${warning}; got ${JSON.stringify(uidWarnings)}`);
  });

  it(`10. with the PROXY protocol on a port, the app sees the client Pod's own address (${version})`, async () => {
    const { recorder, readPod } = suite();
    const own = ip['proxy-protocol'] ?? '';
    const client = ip['client'] ?? '';
    // The proxy reads the listener from the very bootstrap the injector wrote (the stand-in reads --config-path).
    const answer = await askToCall(client, `${own}:8083`);
    assert.equal(answer.status, 200, `the app on 8083 answered the client's call: ${answer.body}`);
    assert.equal(answer.body, `app proxy-protocol ${own} 8083 from ${client}`, 'the app saw the client Pod, not its own address');
    const relay = await eventually('the handoff listener relaying the client\'s connection with a PROXY header', async () =>
      recorder.of('proxy-protocol', 'stand-in', 'relayed').find((record) => record['peer'] === client && record['listener'] === 'inbound_proxy_protocol_8083'), 15_000);
    assert.equal(relay['port'], 15006, 'it came in through the inbound listener');
    assert.match(String(relay['proxyProtocol']), new RegExp(`^PROXY TCP4 ${client.replaceAll('.', '\\.')} ${own.replaceAll('.', '\\.')} \\d+ 8083$`));
    // Its other port has no header: the app sees its own address there (5b).
    const plain = await askToCall(client, `${own}:8080`);
    assert.equal(plain.body, `app proxy-protocol ${own} 8080 from ${own}`);
    const pod = await readPod('proxy-protocol');
    const status = JSON.parse(pod.metadata?.annotations?.['envoy-injector.io/status'] ?? '{}') as Record<string, unknown>;
    assert.deepEqual(status['inboundProxyProtocol'], [8083], 'the status annotation records the port');
  });

  it(`11. in TPROXY mode the app sees the client Pod's own address, and its outbound still goes through the proxy (${version})`, async () => {
    const { recorder, readPod } = suite();
    const own = ip['tproxy'] ?? '';
    const client = ip['client'] ?? '';
    const server = ip['server'] ?? '';
    const pod = await readPod('tproxy');
    const status = JSON.parse(pod.metadata?.annotations?.['envoy-injector.io/status'] ?? '{}') as Record<string, unknown>;
    assert.equal(status['interception'], 'tproxy', 'the status annotation records TPROXY');
    const proxy = pod.spec?.initContainers?.find((container) => container.name === 'envoy');
    const context = proxy?.securityContext;
    // Root with NET_ADMIN and nothing else (issue 50): what Envoy's transparent sockets and marks need, all the stand-in uses.
    assert.deepEqual(
      [context?.runAsUser, context?.capabilities?.add, context?.capabilities?.drop, context?.allowPrivilegeEscalation, context?.privileged],
      [0, ['NET_ADMIN'], ['ALL'], false, false],
      'the proxy runs as root with NET_ADMIN only',
    );
    assert.ok(pod.spec?.initContainers?.find((container) => container.name === 'envoy-init')?.args?.includes('--interception=tproxy'));
    const answer = await askToCall(client, `${own}:8080`);
    const said = (): string => JSON.stringify(recorder.of('tproxy', 'stand-in').filter((record) => record.event !== 'http'));
    assert.equal(answer.status, 200, `the app answered the client's call: ${answer.body}; the stand-in: ${said()}`);
    assert.equal(answer.body, `app tproxy ${own} 8080 from ${client}`, 'the app saw the client Pod, not its own address');
    // The proxy's transparent listener took it and connected to the app from the client's address, marked.
    const relay = await eventually('the transparent listener relaying the client\'s connection', async () =>
      recorder.of('tproxy', 'stand-in', 'relayed').find((record) => record['peer'] === client && record['listener'] === 'inbound_tproxy'), 15_000);
    assert.equal(relay['port'], 8080, 'a transparent socket keeps the original destination as its own address');
    assert.deepEqual(relay['original'], [own, 8080]);
    assert.deepEqual(relay['upstreamSource'], [client, 0]);
    assert.equal(relay['mark'], 1337);
    // Outbound is REDIRECT's, the proxy (root) let out by its group: no loop.
    const out = await askToCall(own, `${server}:8080`);
    assert.equal(out.status, 200, out.body);
    assert.equal(out.body, `app server ${server} 8080 from ${own}`);
    await waitRelayed(recorder, 'tproxy', 'outbound', [server, 8080]);
  });

  for (const name of Object.keys(PROBE_PODS)) {
    it(`9a. ${name}: a tcpSocket readiness probe of a closed port fails, and passes once the app opens it (${version})`, async () => {
      const current = suite();
      const { recorder, waitPod } = current;
      const pod = await waitPod(name, (read) => read.status?.podIP !== undefined && running('app')(read), `Pod ${name} running with an IP`);
      await recorder.waitFor(`the app of Pod ${name} listening`, name, (record) => record.source === 'app' && record.event === 'started');
      if (name === 'probes-captured' && broken() !== 'tcp-probes') {
        const record = JSON.parse(pod.metadata?.annotations?.['envoy-injector.io/tcp-probes'] ?? '[]') as unknown;
        assert.deepEqual(record, [{ container: 'app', probe: 'startupProbe', port: 8080 }, { container: 'app', probe: 'readinessProbe', port: 8081 }, { container: 'app', probe: 'livenessProbe', port: 8082 }]);
      }
      // The kubelet says the probe failed, and the Pod is not Ready while 8081 is closed.
      const failure = await eventually(`the kubelet reporting Pod ${name}'s readiness probe failed`, () => kubeletSaysProbeFailed(current, name, 'readiness'), 30_000);
      assert.ok(!podReady(await current.readPod(name)), `Pod ${name} is not Ready while its port 8081 is closed (${failure})`);
      assert.equal(await askApp(pod.status?.podIP ?? '', '/open?port=8081'), 200);
      await waitPod(name, podReady, `Pod ${name} Ready once its app listens on 8081`, 30_000);
    });

    it(`9b. ${name}: a tcpSocket liveness probe restarts a hung app (${version})`, async () => {
      const current = suite();
      const pod = await current.waitPod(name, podReady, `Pod ${name} Ready (9a)`);
      assert.equal(statuses(pod).get('app')?.restartCount, 0, describePod(pod));
      // The app lives on but no longer accepts on 8082 ("live"): only the liveness probe can tell.
      assert.equal(await askApp(pod.status?.podIP ?? '', '/close?port=8082'), 200);
      const restarted = await current.waitPod(name, (read) => (statuses(read).get('app')?.restartCount ?? 0) >= 1, `the kubelet restarting Pod ${name}'s app after its liveness probe failed`, 60_000);
      // Killed for its liveness probe, as the kubelet says (its Events come on their own time: after the restart, maybe).
      await eventually(`the kubelet saying Pod ${name}'s liveness probe failed (${describePod(restarted)})`, () => kubeletSaysProbeFailed(current, name, 'liveness'), 30_000);
    });
  }
}, { namespaceLabels: broken() === 'tproxy-allow' ? {} : { 'envoy-injector.io/allow-tproxy': 'true' } });
