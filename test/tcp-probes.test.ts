import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { PatchMemo } from '../src/admission/index.js';
import { storedThroughReview } from './helpers/reviews.js';
import { admitPod, applyPodPatch, parseTemplateData, parseYaml, type Admission, type JsonObject, type TemplateSet } from '../src/injection/index.js';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runCli } from '../src/cli.js';
import { bootstrapProblems, mergeBootstraps } from './helpers/envoy-bootstrap.js';
import { ROOT } from './helpers/fixtures.js';
import { only, renderChart } from './helpers/helm.js';

/**
 * tcpSocket probes under capture (issue 41): which probes the chart's
 * default template rewrites, what the patch adds for them, and that the
 * proxy's bootstrap, merged as Envoy merges it, has the pieces the node
 * tier's stand-in emulates (test/helpers/envoy-bootstrap.ts).
 */

type Obj = Record<string, unknown>;
let templates: TemplateSet;
/** The chart with proxy.capture.tcpProbePort 0: a template without a probe listener. */
let withoutListener: TemplateSet;
const templatesOf = async (values: Obj): Promise<TemplateSet> => parseTemplateData(only(await renderChart(values), 'ConfigMap', 'envoy-initializer')['data'] as Record<string, string>);
before(async () => {
  templates = await templatesOf({});
  withoutListener = await templatesOf({ proxy: { capture: { tcpProbePort: 0 } } });
});

const CAPTURE = { 'envoy-injector.io/capture': 'true' };

function pod(annotations: Record<string, string>, spec: Obj): JsonObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', annotations: { 'envoy-injector.io/inject': 'true', ...annotations } }, spec } as JsonObject;
}

/** App, a native sidecar of the Pod's own, and every kind of probe the rewrite leaves alone. */
const SPEC: Obj = {
  initContainers: [
    { name: 'migrate', image: 'm:1' },
    { name: 'log', image: 'l:1', restartPolicy: 'Always', startupProbe: { tcpSocket: { port: 7000 }, failureThreshold: 30 } },
  ],
  containers: [
    {
      name: 'app',
      image: 'a:1',
      ports: [{ name: 'live', containerPort: 8082 }],
      readinessProbe: { tcpSocket: { port: 8081 }, periodSeconds: 2, failureThreshold: 4 },
      livenessProbe: { tcpSocket: { port: 'live' } },
      startupProbe: { tcpSocket: { port: 9000 } },
    },
    { name: 'other', image: 'o:1', readinessProbe: { tcpSocket: { port: 80, host: 'db.example' } }, livenessProbe: { tcpSocket: { port: 'nope' } }, startupProbe: { httpGet: { path: '/', port: 80 } } },
  ],
};

function admit(received: JsonObject, native: boolean): Admission & { injected: Obj } {
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: received, templates, options: { nativeSidecar: native } });
  assert.ok(admission.injection !== undefined, 'the Pod is injected');
  return { ...admission, injected: applyPodPatch(received, admission.injection.patch) as Obj };
}
const containers = (injected: Obj, list: string): Obj[] => ((injected['spec'] as Obj)[list] as Obj[] | undefined) ?? [];
const named = (injected: Obj, list: string, name: string): Obj | undefined => containers(injected, list).find((container) => container['name'] === name);
const annotation = (injected: Obj, key: string): string | undefined => ((injected['metadata'] as Obj)['annotations'] as Record<string, string>)[key];

describe('tcpSocket probes of a captured Pod', () => {
  for (const native of [false, true]) {
    it(`become httpGet probes of the proxy's probe listener, named ports resolved; host, excluded ports and unknown names left alone (${native ? 'native' : 'classic'})`, () => {
      const { injected, warnings, tcpProbes } = admit(pod({ ...CAPTURE, 'envoy-injector.io/capture-exclude-inbound-ports': '9000' }, SPEC), native);
      const app = named(injected, 'containers', 'app');
      assert.deepEqual(app?.['readinessProbe'], { periodSeconds: 2, failureThreshold: 4, httpGet: { path: '/tcp/8081', port: 15020 } });
      assert.deepEqual(app?.['livenessProbe'], { httpGet: { path: '/tcp/8082', port: 15020 } });
      assert.deepEqual(app?.['startupProbe'], { tcpSocket: { port: 9000 } }, 'port 9000 is excluded from capture: the kubelet reaches the app itself');
      // A classic proxy starts after the native sidecar, whose startupProbe holds it: left as written (issue 50).
      const logStartup = native ? { failureThreshold: 30, httpGet: { path: '/tcp/7000', port: 15020 } } : { tcpSocket: { port: 7000 }, failureThreshold: 30 };
      assert.deepEqual(named(injected, 'initContainers', 'log')?.['startupProbe'], logStartup);
      const other = named(injected, 'containers', 'other');
      assert.deepEqual(other?.['readinessProbe'], { tcpSocket: { port: 80, host: 'db.example' } });
      assert.deepEqual(other?.['livenessProbe'], { tcpSocket: { port: 'nope' } });
      assert.deepEqual(JSON.parse(annotation(injected, 'envoy-injector.io/tcp-probes') ?? 'null'), [
        ...(native ? [{ container: 'log', probe: 'startupProbe', port: 7000 }] : []),
        { container: 'app', probe: 'readinessProbe', port: 8081 },
        { container: 'app', probe: 'livenessProbe', port: 8082 },
      ]);
      assert.deepEqual(tcpProbes?.kept.map(({ container, probe }) => `${container}.${probe}`), [...(native ? [] : ['log.startupProbe']), 'app.startupProbe', 'other.readinessProbe', 'other.livenessProbe']);
      assert.ok(warnings.some((warning) => warning.includes('("other").livenessProbe.tcpSocket.port: "nope" names no port')), warnings.join('\n'));
      // The proxy reads the probes' bootstrap from the annotation, through a downwardAPI file.
      const envoy = named(injected, native ? 'initContainers' : 'containers', 'envoy');
      assert.deepEqual((envoy?.['args'] as string[]).slice(-2), ['--config-path', '/etc/envoy-injector/proxy-config/bootstrap.json']);
      assert.deepEqual((envoy?.['volumeMounts'] as Obj[]).find((mount) => mount['name'] === 'envoy-proxy-config'), { name: 'envoy-proxy-config', mountPath: '/etc/envoy-injector/proxy-config', readOnly: true });
      const volume = (((injected['spec'] as Obj)['volumes'] as Obj[]) ?? []).find((entry) => entry['name'] === 'envoy-proxy-config');
      assert.deepEqual(volume?.['downwardAPI'], { items: [{ path: 'bootstrap.json', fieldRef: { apiVersion: 'v1', fieldPath: "metadata.annotations['envoy-injector.io/proxy-config']" } }] });
      // The kubelet's probe of the listener is never redirected.
      const init = named(injected, 'initContainers', 'envoy-init');
      assert.ok((init?.['args'] as string[]).includes('--proxy-ports=9901,9902,15020'));
    });
  }

  it('are left as written without capture, with rewrite-tcp-probes "false", and say so for a bad value', () => {
    for (const annotations of [{ 'envoy-injector.io/capture': 'false' }, { ...CAPTURE, 'envoy-injector.io/rewrite-tcp-probes': 'false' }]) {
      const { injected } = admit(pod(annotations, SPEC), true);
      assert.deepEqual(named(injected, 'containers', 'app')?.['readinessProbe'], { tcpSocket: { port: 8081 }, periodSeconds: 2, failureThreshold: 4 }, JSON.stringify(annotations));
      assert.equal(annotation(injected, 'envoy-injector.io/tcp-probes'), undefined);
      assert.equal(named(injected, 'initContainers', 'envoy')?.['volumeMounts'], undefined);
    }
    const { injected, warnings } = admit(pod({ ...CAPTURE, 'envoy-injector.io/rewrite-tcp-probes': 'yes' }, SPEC), true);
    assert.ok(annotation(injected, 'envoy-injector.io/tcp-probes') !== undefined);
    assert.ok(warnings.includes('envoy-injector.io/rewrite-tcp-probes: "yes" is not "true" or "false"; ignored'), warnings.join('\n'));
  });

  it('a template without a probe listener leaves them, and warns that they pass while the proxy runs', () => {
    const received = pod(CAPTURE, SPEC);
    const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: received, templates: withoutListener, options: { nativeSidecar: true } });
    const injected = applyPodPatch(received, admission.injection?.patch ?? []) as Obj;
    assert.deepEqual(named(injected, 'containers', 'app')?.['livenessProbe'], { tcpSocket: { port: 'live' } });
    assert.ok(
      admission.warnings.includes('tcpSocket probes of captured ports (log.startupProbe, app.startupProbe, app.readinessProbe, app.livenessProbe) pass while the proxy runs, whether or not the app listens: the template has no probe listener (capture.tcpProbes); use httpGet, grpc or exec probes, or a template that has one'),
      admission.warnings.join('\n'),
    );
  });

  it('a Pod without tcpSocket probes gets nothing of it; a reinvocation changes nothing', () => {
    const plain = admit(pod(CAPTURE, { containers: [{ name: 'app', image: 'a:1', readinessProbe: { httpGet: { path: '/', port: 80 } } }] }), true);
    assert.equal(annotation(plain.injected, 'envoy-injector.io/tcp-probes'), undefined);
    assert.ok(!plain.injection?.status.volumes.includes('envoy-proxy-config'));
    const { injected } = admit(pod(CAPTURE, SPEC), false);
    const again = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: injected as JsonObject, templates, options: { nativeSidecar: false } });
    assert.equal(again.decision.reason, 'already_injected');
    assert.equal(again.injection, undefined);
  });

  it('the webhook keys its patch memo on the probes: two Pods of one shape but their probes get their own patches', () => {
    const memo = new PatchMemo();
    const review = (uid: string, port: number): Obj =>
      storedThroughReview(pod(CAPTURE, { containers: [{ name: 'app', image: 'a:1', readinessProbe: { tcpSocket: { port } } }] }), uid, 'shop', { templates, namespaceLabels: {}, options: {}, memo }) as Obj;
    for (const [uid, port] of [['a', 8081], ['b', 8082], ['c', 8081]] as const) {
      assert.deepEqual(named(review(uid, port), 'containers', 'app')?.['readinessProbe'], { httpGet: { path: `/tcp/${port}`, port: 15020 } }, uid);
    }
  });
});

describe("a native sidecar's tcpSocket probes with a classic proxy (issue 50)", () => {
  /** The Pod's own native sidecar, probed three ways on 7000, then an app. */
  const SIDECAR_SPEC: Obj = {
    initContainers: [
      {
        name: 'helper',
        image: 'h:1',
        restartPolicy: 'Always',
        startupProbe: { tcpSocket: { port: 7000 }, periodSeconds: 1 },
        readinessProbe: { tcpSocket: { port: 7000 } },
        livenessProbe: { tcpSocket: { port: 7000 }, failureThreshold: 5 },
      },
    ],
    containers: [{ name: 'app', image: 'a:1', livenessProbe: { tcpSocket: { port: 8080 } } }],
  };
  const STARTUP_WHY = "a native sidecar starts before a classic proxy and envoy-init's rules, which the kubelet starts only once this probe passes: as written it reaches the sidecar itself (rewritten, it would wait on the proxy for ever)";
  const LIVENESS_WHY =
    'a native sidecar runs before a classic proxy, which starts after every init container: as written it reaches the sidecar until envoy-init\'s rules are in (rewritten, it would fail and restart the sidecar until the proxy runs), then passes while the proxy runs, whether or not the sidecar listens on port 7000';

  it('leaves its startup and liveness probes as written, which run before the proxy, and rewrites its readiness probe; a native proxy rewrites all three', () => {
    const classic = admit(pod(CAPTURE, SIDECAR_SPEC), false);
    const helper = named(classic.injected, 'initContainers', 'helper');
    assert.deepEqual(helper?.['startupProbe'], { tcpSocket: { port: 7000 }, periodSeconds: 1 });
    assert.deepEqual(helper?.['livenessProbe'], { tcpSocket: { port: 7000 }, failureThreshold: 5 });
    assert.deepEqual(helper?.['readinessProbe'], { httpGet: { path: '/tcp/7000', port: 15020 } });
    assert.deepEqual(named(classic.injected, 'containers', 'app')?.['livenessProbe'], { httpGet: { path: '/tcp/8080', port: 15020 } });
    assert.deepEqual(classic.tcpProbes?.kept, [
      { container: 'helper', probe: 'startupProbe', why: STARTUP_WHY },
      { container: 'helper', probe: 'livenessProbe', why: LIVENESS_WHY },
    ]);
    assert.deepEqual(classic.warnings, []);
    // envoy-init goes after the sidecar: its rules are not there while the startup probe runs.
    assert.deepEqual(containers(classic.injected, 'initContainers').map((entry) => entry['name']), ['helper', 'envoy-init']);
    const native = admit(pod(CAPTURE, SIDECAR_SPEC), true);
    assert.deepEqual(native.tcpProbes?.rewrites.map(({ container, probe }) => `${container}.${probe}`), ['helper.startupProbe', 'helper.readinessProbe', 'helper.livenessProbe', 'app.livenessProbe']);
    assert.deepEqual(native.tcpProbes?.kept, []);
  });

  it('in CNI mode, where the rules come first, leaves the startup probe and warns that it cannot pass; the others are rewritten', async () => {
    const cni = await templatesOf({ proxy: { capture: { mode: 'cni' } } });
    const received = pod(CAPTURE, SIDECAR_SPEC);
    const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: received, templates: cni, options: { nativeSidecar: false } });
    assert.equal(admission.capture?.capture === true ? admission.capture.mode : undefined, 'cni');
    assert.deepEqual(admission.tcpProbes?.rewrites.map(({ container, probe }) => `${container}.${probe}`), ['helper.readinessProbe', 'helper.livenessProbe', 'app.livenessProbe']);
    assert.deepEqual(admission.tcpProbes?.kept, [
      {
        container: 'helper',
        probe: 'startupProbe',
        why: "a native sidecar starts before a classic proxy, which the kubelet starts only once this probe passes, and in CNI mode the rules send port 7000 to the proxy from the Pod's start: it cannot pass, as written or rewritten",
      },
    ]);
    assert.ok(
      admission.warnings.includes(
        'initContainers[0] ("helper").startupProbe: with a classic proxy in CNI mode, a native sidecar\'s startup probe of captured port 7000 never passes (the rules are in place before the sidecar starts, the proxy starts only once it passed); exclude the port (envoy-injector.io/capture-exclude-inbound-ports) or use a native proxy (envoy-injector.io/native-sidecar: "true")',
      ),
      admission.warnings.join('\n'),
    );
  });

  it('explain says which probes are left as written and why', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'tcp-probes-'));
    const file = join(dir, 'pod.json');
    await writeFile(file, JSON.stringify(pod({ ...CAPTURE, 'envoy-injector.io/native-sidecar': 'false' }, SIDECAR_SPEC)));
    let stdout = '';
    const io = { stdin: process.stdin, stdout: { write: (chunk: string) => (stdout += chunk) }, stderr: { write: () => true } };
    try {
      const code = await runCli(['explain', '-f', file, '--template-file', join(ROOT, 'test/golden/tcp-probes-templates.yaml'), '--namespace-labels', 'envoy-injector.io/inject=enabled'], io);
      assert.equal(code, 0, stdout);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
    const lines = stdout.split('\n').map((line) => line.trim()).filter((line) => line.startsWith('tcpSocket probe helper.'));
    assert.deepEqual(lines, [
      'tcpSocket probe helper.readinessProbe (port 7000) -> httpGet :15020/tcp/7000: the proxy answers 200 while 127.0.0.1:7000 accepts, else 503',
      `tcpSocket probe helper.startupProbe left as written: ${STARTUP_WHY}`,
      `tcpSocket probe helper.livenessProbe left as written: ${LIVENESS_WHY}`,
    ]);
  });
});

describe("the proxy's bootstrap for the probes", () => {
  it('merged under the chart\'s own, as Envoy merges --config-yaml over --config-path, passes the bootstrap check with the pieces the stand-in emulates', () => {
    const { injected, capture } = admit(pod(CAPTURE, SPEC), true);
    const envoy = named(injected, 'initContainers', 'envoy') ?? {};
    const fromPath = JSON.parse(annotation(injected, 'envoy-injector.io/proxy-config') ?? '{}') as Obj;
    const fromYaml = parseYaml((envoy['args'] as string[])[1] ?? '') as Obj;
    const settings = capture?.capture === true ? capture.settings : undefined;
    const subject = { container: envoy, capture: settings };
    assert.deepEqual(bootstrapProblems({ ...subject, bootstrap: mergeBootstraps(fromPath, fromYaml) }), []);
    const listener = ((fromPath['static_resources'] as Obj)['listeners'] as Obj[])[0];
    assert.equal(listener?.['name'], 'tcp_probes');
    // The check has teeth: each piece the stand-in relies on, taken away, is found.
    const broken = (from: string, to: string): string[] => bootstrapProblems({ ...subject, bootstrap: mergeBootstraps(JSON.parse(JSON.stringify(fromPath).replace(from, to)) as Obj, fromYaml) });
    assert.deepEqual(broken('"no_traffic_interval":"1s",', ''), ['cluster tcp_probe_7000: its health check needs no_traffic_interval']);
    assert.deepEqual(broken('"pass_through_mode":false', '"pass_through_mode":true'), ['tcp_probes.http_filters[0]: pass_through_mode must be false (the filter answers)']);
    assert.deepEqual(broken('"tcp_health_check":{}', '"tcp_health_check":{"send":{"text":"00"}}'), ['clusters[0].health_checks[0].tcp_health_check.send: not a field of tcp_health_check', 'cluster tcp_probe_7000: needs one connect-only tcp_health_check']);
    assert.deepEqual(broken('"port_value":8081}', '"port_value":8080}'), ['cluster tcp_probe_8081: must be STATIC with the one endpoint 127.0.0.1:8081']);
    assert.deepEqual(broken('"port_value":15020', '"port_value":15021'), ["capture.proxyPorts lacks the proxy's port 15021", "the tcp_probes listener's port 15021 is not capture.tcpProbes.port 15020"]);
  });
});

describe('what the app sees as its client', () => {
  it("an inbound listener that speaks HTTP must set use_remote_address, so the app gets the client's address in X-Forwarded-For; the chart's, a TCP proxy, passes as it is", () => {
    const { injected, capture } = admit(pod(CAPTURE, { containers: [{ name: 'app', image: 'a:1' }] }), true);
    const envoy = named(injected, 'initContainers', 'envoy') ?? {};
    const bootstrap = parseYaml((envoy['args'] as string[])[1] ?? '') as Obj;
    const subject = { container: envoy, capture: capture?.capture === true ? capture.settings : undefined };
    assert.deepEqual(bootstrapProblems({ ...subject, bootstrap }), []);
    const http = (extra: Obj): Obj => {
      const copy = JSON.parse(JSON.stringify(bootstrap)) as Obj;
      const inbound = ((copy['static_resources'] as Obj)['listeners'] as Obj[]).find((listener) => listener['name'] === 'inbound') as Obj;
      const chains = inbound['filter_chains'] as Obj[];
      chains[chains.length - 1] = { filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager', stat_prefix: 'inbound', route_config: { virtual_hosts: [{ name: 'inbound', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'inbound_passthrough' } }] }] }, http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } }], ...extra } }] };
      return copy;
    };
    assert.deepEqual(bootstrapProblems({ ...subject, bootstrap: http({}) }), ["the inbound listener speaks HTTP without use_remote_address: the app would not get the client's address in X-Forwarded-For"]);
    assert.deepEqual(bootstrapProblems({ ...subject, bootstrap: http({ use_remote_address: true }) }), []);
  });
});

describe('explain --mode policy', () => {
  it('says that policy mode leaves the tcpSocket probes the webhook rewrites and ignores the PROXY protocol, and only for such a Pod', async () => {
    let stdout = '';
    const io = { stdin: process.stdin, stdout: { write: (chunk: string) => (stdout += chunk) }, stderr: { write: () => true } };
    const code = await runCli(['explain', '--mode', 'policy', '-o', 'json', '-f', join(ROOT, 'test/golden/tcp-probes.yaml'), '--template-file', join(ROOT, 'test/golden/tcp-probes-templates.yaml'), '--namespace-labels', 'envoy-injector.io/inject=enabled'], io);
    assert.equal(code, 0);
    const said = (JSON.parse(stdout) as { name: string; warnings: string[] }[]).map(({ name, warnings }) => [
      name,
      warnings.some((warning) => warning.startsWith("policy mode leaves this Pod's tcpSocket probes as written")),
      warnings.some((warning) => warning.startsWith('policy mode ignores envoy-injector.io/inbound-proxy-protocol')),
    ]);
    assert.deepEqual(said, [['probed', true, false], ['opted-out', false, false], ['headers', true, true]]);
  });
});
