import assert from 'node:assert/strict';
import { get } from 'node:http';
import { connect, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, it } from 'node:test';
import type { V1Pod } from '@kubernetes/client-node';
import { eventually, helmInstall } from '../e2e/cluster.js';
import { runStatusCli } from '../helpers/fleet-fixture.js';
import { appPod, describePod, forEachNode, podReady, running, statuses } from './node-suite.js';
import { NODE_IP } from './network.js';
import { relayed } from './traffic.js';

/**
 * Scenario 13 (issue 52): the proxy resized in place. A captured Pod
 * (native proxy, and classic) runs with the chart's proxy resources; the
 * template's CPU and memory change (helm upgrade); `status --resize` sends
 * the resize through `pods/resize`. The kubelet applies it to the running
 * proxy (its status's `resources` report the new values), no container
 * restarts, and a connection the test holds open through the proxy to the
 * app (one HTTP request sent a line at a time, before, during and after the
 * resize) is answered at the end.
 */
const CAPTURE = {
  'envoy-injector.io/capture': 'true',
  // The node's address (the recorder, which the apps report to) goes around the proxy.
  'envoy-injector.io/capture-exclude-outbound-cidrs': `${NODE_IP}/32`,
};
const BEFORE = { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } };
const AFTER = { requests: { cpu: '150m', memory: '96Mi' }, limits: { cpu: '750m', memory: '320Mi' } };
const PODS = { native: 'resize-native', classic: 'resize-classic' } as const;

/**
 * An HTTP request to HOST:8080 held open: its head sent a header line every
 * 2 s (the app waits 10 s at most for the next bytes); `finish` ends it and
 * resolves with the answer.
 */
function heldRequest(host: string): { readonly socket: Socket; finish(): Promise<string> } {
  const socket = connect({ host, port: 8080 });
  let answer = '';
  socket.setEncoding('utf8').on('data', (chunk: string) => (answer += chunk));
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  socket.once('error', () => undefined);
  socket.write('GET / HTTP/1.1\r\nhost: app\r\n');
  // Unreferenced, and the socket closed by the suite's `after`: a failed test must not keep the process alive.
  const keep = setInterval(() => socket.write('x-held: 1\r\n'), 2_000).unref();
  socket.once('close', () => clearInterval(keep));
  return {
    socket,
    finish: async () => {
      clearInterval(keep);
      socket.write('\r\n');
      await Promise.race([closed, sleep(15_000)]);
      return answer;
    },
  };
}

type Resources = typeof BEFORE;

/** RESOURCES' CPU and memory in one order, for comparing what the API server and the kubelet report (class instances, keys in their order). */
function normalized(resources: { requests?: Record<string, string>; limits?: Record<string, string> } | undefined): Resources | undefined {
  if (resources === undefined) return undefined;
  const pick = (amounts: Record<string, string> | undefined) => ({ cpu: amounts?.['cpu'] ?? '', memory: amounts?.['memory'] ?? '' });
  return { requests: pick(resources.requests), limits: pick(resources.limits) };
}

function proxyStatusResources(pod: V1Pod): Resources | undefined {
  return normalized(statuses(pod).get('envoy')?.resources);
}

/** Whether the app answers GET / on HOST:8080 (through the proxy): it listens a moment after its container runs. */
function answers(host: string): Promise<true | undefined> {
  return new Promise((resolve) => {
    const call = get({ host, port: 8080, path: '/', timeout: 2_000 }, (response) => {
      response.resume();
      response.once('end', () => resolve(response.statusCode === 200 ? true : undefined));
    });
    call.once('timeout', () => call.destroy());
    call.once('error', () => resolve(undefined));
  });
}

const resizeDone = (pod: V1Pod): boolean =>
  !(pod.status?.conditions ?? []).some((condition) => condition.type.startsWith('PodResize') && condition.status === 'True') &&
  JSON.stringify(proxyStatusResources(pod)) === JSON.stringify(normalized(AFTER));

forEachNode('the proxy resized in place after a template change', (suite, version) => {
  const ip: Record<string, string> = {};
  const sockets: Socket[] = [];
  after(() => {
    for (const socket of sockets) socket.destroy();
  });
  before(async () => {
    await suite().createPods([appPod(PODS.native, CAPTURE), appPod(PODS.classic, { ...CAPTURE, 'envoy-injector.io/native-sidecar': 'false' })]);
    for (const name of Object.values(PODS)) {
      const pod = await suite().waitPod(name, (read) => podReady(read) && running('app', 'envoy')(read), `Pod ${name} Ready`, 120_000);
      ip[name] = pod.status?.podIP ?? '';
      await eventually(`the app of ${name} answering through its proxy`, () => answers(ip[name] ?? ''), 30_000, 500);
    }
  });

  it(`13. status --resize: the running proxy gets the template's new CPU and memory, a connection through it is unbroken, restart counts 0 (${version})`, async () => {
    const { plane, release, recorder, namespace } = suite();
    assert.ok(release !== undefined);
    for (const name of Object.values(PODS)) assert.deepEqual(proxyStatusResources(await suite().readPod(name)), normalized(BEFORE), `${name}: the kubelet runs the proxy with the template's first values`);
    const inbound = (name: string): number => relayed(recorder, name, 'inbound', [ip[name] ?? '', 8080]);
    // The records arrive a moment after the fact: the warm-up calls' first.
    await eventually('the warm-up calls recorded', async () => (Object.values(PODS).every((name) => inbound(name) > 0) ? true : undefined), 15_000);
    const before = Object.fromEntries(Object.values(PODS).map((name) => [name, inbound(name)]));
    const held = Object.fromEntries(Object.values(PODS).map((name) => [name, heldRequest(ip[name] ?? '')]));
    sockets.push(...Object.values(held).map((each) => each.socket));
    await eventually('both held connections relayed by the proxy', async () => (Object.values(PODS).every((name) => inbound(name) === (before[name] ?? 0) + 1) ? true : undefined), 15_000);

    await helmInstall(plane, release, { proxy: { resources: AFTER } }, { upgrade: true });
    const kubeconfig = plane.kubeconfigPath;
    const status = (args: string[]) => runStatusCli(['--kubeconfig', kubeconfig, '--injector-namespace', release.namespace, '-n', namespace, '-o', 'json', ...args]);
    const sorted = await eventually('status: the two Pods resizable (the injector has the new template)', async () => {
      const result = await status([]);
      const report = JSON.parse(result.stdout) as { totals: { resizable: number } };
      return report.totals.resizable === 2 ? report : undefined;
    }, 30_000, 1_000);
    assert.ok(sorted);
    const resized = await status(['--resize', '--yes']);
    const outcome = JSON.parse(resized.stdout) as { resize: { resized: { name: string }[]; notResized: unknown[]; failed: unknown[] } };
    assert.deepEqual(outcome.resize.resized.map((entry) => entry.name).sort(), Object.values(PODS).sort(), resized.stderr);

    for (const name of Object.values(PODS)) {
      const pod = await eventually(`the kubelet applied ${name}'s resize`, async () => {
          const read = await suite().readPod(name);
        return resizeDone(read) ? read : undefined;
      }, 60_000, 1_000);
      for (const container of ['envoy', 'app']) assert.equal(statuses(pod).get(container)?.restartCount, 0, `${name}: ${container} never restarted: ${describePod(pod)}`);
      const proxy = [...(pod.spec?.initContainers ?? []), ...pod.spec!.containers].find((container) => container.name === 'envoy');
      assert.deepEqual(normalized(proxy?.resources), normalized(AFTER));
    }
    for (const name of Object.values(PODS)) {
      const answer = await held[name]!.finish();
      assert.match(answer, /^HTTP\/1\.1 200 X\r\n[\s\S]*\r\napp /, `${name}: the request held across the resize answered by the app: ${JSON.stringify(answer)}`);
      assert.equal(inbound(name), (before[name] ?? 0) + 1, `${name}: one connection, relayed by the proxy`);
    }
    const after = await status([]);
    assert.equal(after.code, 0, `every Pod current after the resize: ${after.stdout}`);
  });

  it(`13b. a resize the node cannot hold: beyond its allocatable refused by the API server (1.36) or Infeasible (1.34), within it Deferred; reported per Pod, never sent again (${version})`, async () => {
    const { plane, release, namespace } = suite();
    assert.ok(release !== undefined);
    const status = (args: string[]) => runStatusCli(['--kubeconfig', plane.kubeconfigPath, '--injector-namespace', release.namespace, '-n', namespace, '-o', 'json', ...args]);
    const upgradeTo = async (cpu: string): Promise<void> => {
      await helmInstall(plane, release, { proxy: { resources: { requests: { cpu, memory: '96Mi' }, limits: { cpu, memory: '320Mi' } } } }, { upgrade: true });
      await eventually(`status: the two Pods resizable to ${cpu} CPU`, async () => ((JSON.parse((await status([])).stdout) as { totals: { resizable: number } }).totals.resizable === 2 ? true : undefined), 30_000, 1_000);
    };
    const generations = async () => Promise.all(Object.values(PODS).map(async (name) => (await suite().readPod(name)).metadata?.generation));
    type Outcome = { resize: { resized: unknown[]; notResized: { why: string }[]; failed: unknown[] } };
    // More than the node has: the API server refuses it (1.36: "node didn't have enough allocatable resources").
    await upgradeTo('1000');
    const before = await generations();
    const refused = JSON.parse((await status(['--resize', '--yes'])).stdout) as Outcome;
    if (version === '1.36') {
      assert.deepEqual(refused.resize.resized, [], JSON.stringify(refused.resize));
      assert.ok(refused.resize.notResized.length === 2 && refused.resize.notResized.every((entry) => /enough allocatable/.test(entry.why)), JSON.stringify(refused.resize));
      assert.deepEqual(await generations(), before, 'nothing changed');
      // Within the node's allocatable, beyond what is free beside the other Pod: the kubelet defers it.
      await upgradeTo('1900m');
    }
    // 1.34's API server takes the 1000 CPUs: the kubelet says Infeasible.
    const sent = version === '1.36' ? (JSON.parse((await status(['--resize', '--yes'])).stdout) as Outcome) : refused;
    assert.equal(sent.resize.resized.length, 2, JSON.stringify(sent.resize));
    type Pending = { name: string; condition: string; reason: string };
    const reported = await eventually('status reporting the resizes pending', async () => {
      const result = await status([]);
      const pending = (JSON.parse(result.stdout) as { resizePending: Pending[] }).resizePending;
      return pending.length >= 1 && result.code === 3 ? pending : undefined;
    }, 60_000, 1_000);
    assert.ok(reported.every((entry) => entry.condition === 'PodResizePending' && /^(Deferred|Infeasible)$/.test(entry.reason)), JSON.stringify(reported));
    const pendingBefore = await generations();
    const again = JSON.parse((await status(['--resize', '--yes'])).stdout) as Outcome;
    assert.deepEqual(again.resize.resized, [], 'not sent again');
    assert.deepEqual(await generations(), pendingBefore, 'no resize sent by the second run');
    for (const name of Object.values(PODS)) {
      const pod = await suite().readPod(name);
      for (const container of ['envoy', 'app']) assert.equal(statuses(pod).get(container)?.restartCount, 0, describePod(pod));
    }
  });
});
