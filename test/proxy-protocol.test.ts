import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { PatchMemo } from '../src/admission/index.js';
import { storedThroughReview } from './helpers/reviews.js';
import { admitPod, applyPodPatch, parseTemplateData, parseYaml, type Admission, type JsonObject, type TemplateSet } from '../src/injection/index.js';
import { explainCapture, captureLines } from '../src/commands/capture-text.js';
import { toExplanation } from '../src/commands/explain.js';
import { bootstrapProblems, mergeBootstraps } from './helpers/envoy-bootstrap.js';
import { only, renderChart } from './helpers/helm.js';

/**
 * The PROXY protocol on the proxy's hop to the app (issue 41, docs/design.md
 * §11): which Pods get it, what the patch adds, and that the proxy's
 * bootstrap, merged as Envoy merges it, has the pieces the node tier's
 * stand-in emulates (test/helpers/envoy-bootstrap.ts).
 */

type Obj = Record<string, unknown>;
let templates: TemplateSet;
before(async () => {
  templates = parseTemplateData(only(await renderChart({}), 'ConfigMap', 'envoy-initializer')['data'] as Record<string, string>);
});

const CAPTURE = { 'envoy-injector.io/capture': 'true' };
const ASK = 'envoy-injector.io/inbound-proxy-protocol';

function pod(annotations: Record<string, string>, spec: Obj = { containers: [{ name: 'app', image: 'a:1' }] }): JsonObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'queue', annotations: { 'envoy-injector.io/inject': 'true', ...annotations } }, spec } as JsonObject;
}

function admit(received: JsonObject, set: TemplateSet = templates): Admission & { injected: Obj } {
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: received, templates: set, options: { nativeSidecar: true } });
  assert.ok(admission.injection !== undefined, 'the Pod is injected');
  return { ...admission, injected: applyPodPatch(received, admission.injection.patch) as Obj };
}
const annotationOf = (injected: Obj, key: string): string | undefined => ((injected['metadata'] as Obj)['annotations'] as Record<string, string>)[key];
const proxyOf = (injected: Obj): Obj => (((injected['spec'] as Obj)['initContainers'] as Obj[]) ?? []).find((container) => container['name'] === 'envoy') ?? {};
const statusOf = (injected: Obj): Obj => JSON.parse(annotationOf(injected, 'envoy-injector.io/status') ?? '{}') as Obj;

describe('the PROXY protocol on the proxy\'s hop to the app', () => {
  it('a captured Pod listing ports gets a handoff listener per port, one PROXY protocol cluster, and the record in its status', () => {
    const { injected, warnings, proxyProtocol } = admit(pod({ ...CAPTURE, [ASK]: '8080,5672,8080' }));
    assert.deepEqual(warnings, []);
    assert.deepEqual(proxyProtocol?.ports, [5672, 8080]);
    assert.deepEqual(statusOf(injected)['inboundProxyProtocol'], [5672, 8080]);
    const bootstrap = JSON.parse(annotationOf(injected, 'envoy-injector.io/proxy-config') ?? '{}') as Obj;
    const resources = bootstrap['static_resources'] as { listeners: Obj[]; clusters: Obj[] };
    assert.deepEqual(resources.listeners.map((listener) => [listener['name'], listener['bind_to_port']]), [['inbound_proxy_protocol_5672', false], ['inbound_proxy_protocol_8080', false]]);
    assert.deepEqual(resources.clusters.map((cluster) => cluster['name']), ['inbound_proxy_protocol']);
    const socket = resources.clusters[0]?.['transport_socket'] as Obj;
    assert.equal(socket['name'], 'envoy.transport_sockets.upstream_proxy_protocol');
    assert.deepEqual((socket['typed_config'] as Obj)['config'], { version: 'V1' });
    // The proxy reads it as it reads the probes' (one file, one --config-path).
    assert.deepEqual((proxyOf(injected)['args'] as string[]).slice(-2), ['--config-path', '/etc/envoy-injector/proxy-config/bootstrap.json']);
    assert.ok(((injected['spec'] as Obj)['volumes'] as Obj[]).some((volume) => volume['name'] === 'envoy-proxy-config'));
    assert.ok((statusOf(injected)['volumes'] as string[]).includes('envoy-proxy-config'));
  });

  it('with tcpSocket probes too: one bootstrap holds both', () => {
    const spec = { containers: [{ name: 'app', image: 'a:1', readinessProbe: { tcpSocket: { port: 5672 } } }] };
    const { injected } = admit(pod({ ...CAPTURE, [ASK]: '5672' }, spec));
    const resources = (JSON.parse(annotationOf(injected, 'envoy-injector.io/proxy-config') ?? '{}') as Obj)['static_resources'] as { listeners: Obj[]; clusters: Obj[] };
    assert.deepEqual(resources.listeners.map((listener) => listener['name']), ['tcp_probes', 'inbound_proxy_protocol_5672']);
    assert.deepEqual(resources.clusters.map((cluster) => cluster['name']), ['tcp_probe_5672', 'inbound_proxy_protocol']);
    assert.equal((proxyOf(injected)['args'] as string[]).filter((arg) => arg === '--config-path').length, 1);
  });

  it('merged under the chart\'s bootstrap, as Envoy merges --config-yaml over --config-path, passes the bootstrap check; the check has teeth', () => {
    const { injected, capture } = admit(pod({ ...CAPTURE, [ASK]: '8080' }));
    const envoy = proxyOf(injected);
    const fromPath = JSON.parse(annotationOf(injected, 'envoy-injector.io/proxy-config') ?? '{}') as Obj;
    const fromYaml = parseYaml((envoy['args'] as string[])[1] ?? '') as Obj;
    const subject = { container: envoy, capture: capture?.capture === true ? capture.settings : undefined };
    assert.deepEqual(bootstrapProblems({ ...subject, bootstrap: mergeBootstraps(fromPath, fromYaml) }), []);
    const broken = (from: string, to: string, yaml = fromYaml): string[] => bootstrapProblems({ ...subject, bootstrap: mergeBootstraps(JSON.parse(JSON.stringify(fromPath).replace(from, to)) as Obj, yaml) });
    assert.deepEqual(broken('"version":"V1"', '"version":"V3"'), ['clusters[0].transport_socket.typed_config.config.version: V3 is not V1 or V2']);
    assert.deepEqual(broken(',"transport_socket":{"name":"envoy.transport_sockets.raw_buffer","typed_config":{"@type":"type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer"}}', ''), [
      'clusters[0].transport_socket.typed_config.transport_socket: required (the socket it wraps)',
    ]);
    assert.deepEqual(broken('"bind_to_port":false', '"bind_to_port":true'), ["capture.proxyPorts lacks the proxy's port 8080"]);
    assert.deepEqual(broken('"cluster":"inbound_proxy_protocol"', '"cluster":"inbound_passthrough"'), [
      'clusters[0] "inbound_proxy_protocol": no listener uses it',
      'listener inbound_proxy_protocol_8080: must be one TCP proxy to an ORIGINAL_DST cluster with the upstream_proxy_protocol transport socket',
    ]);
    // A chart whose inbound listener did not hand off (or whose outbound did) would give the app no header, or give it to the app's own outbound calls.
    const swapped = JSON.parse(JSON.stringify(fromYaml).replace('"use_original_dst":true', '"x":1').replace('"traffic_direction":"OUTBOUND"', '"traffic_direction":"OUTBOUND","use_original_dst":true').replace('"x":1', '"traffic_direction":"INBOUND"')) as Obj;
    assert.ok(broken('', '', swapped).includes("the outbound listener must not hand off (use_original_dst): the app's own connections to a PROXY protocol port elsewhere would get the header"));
  });

  it('an invalid list, a port the rules do not capture, an uncaptured Pod: a warning, and no change', () => {
    const cases: [Record<string, string>, string][] = [
      [{ ...CAPTURE, [ASK]: '80a' }, `${ASK}: "80a" is not a comma-separated list of ports (1-65535), without spaces (example: "5432,6379"); ignored, the app gets no PROXY header`],
      [{ ...CAPTURE, [ASK]: '8080,15020' }, `${ASK}: port 15020 is not captured (the proxy's own ports or the Pod's inbound exclusions); ignored, the app gets no PROXY header`],
      [{ ...CAPTURE, 'envoy-injector.io/capture-exclude-inbound-ports': '8080', [ASK]: '8080' }, `${ASK}: port 8080 is not captured (the proxy's own ports or the Pod's inbound exclusions); ignored, the app gets no PROXY header`],
    ];
    for (const [annotations, warning] of cases) {
      const { injected, warnings } = admit(pod(annotations));
      assert.ok(warnings.includes(warning), `${JSON.stringify(annotations)}: ${warnings.join('\n')}`);
      assert.equal(annotationOf(injected, 'envoy-injector.io/proxy-config'), undefined);
      assert.equal(statusOf(injected)['inboundProxyProtocol'], undefined);
    }
    const { warnings } = admit(pod({ 'envoy-injector.io/capture': 'false', [ASK]: '8080' }));
    assert.ok(warnings.some((warning) => warning.startsWith(`${ASK}: the Pod's traffic is not captured`)), warnings.join('\n'));
    assert.deepEqual(admit(pod({ ...CAPTURE, [ASK]: '' })).warnings, [], 'an empty list asks for nothing');
  });

  it('a reinvocation changes nothing; the webhook keys its patch memo on the ports', () => {
    const { injected } = admit(pod({ ...CAPTURE, [ASK]: '8080' }));
    const again = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: injected as JsonObject, templates, options: { nativeSidecar: true } });
    assert.equal(again.decision.reason, 'already_injected');
    assert.equal(again.injection, undefined);
    const memo = new PatchMemo();
    const review = (uid: string, ports: string): Obj =>
      storedThroughReview(pod({ ...CAPTURE, [ASK]: ports }), uid, 'shop', { templates, namespaceLabels: {}, options: { nativeSidecar: true }, memo }) as Obj;
    for (const [uid, ports, expected] of [['a', '8080', [8080]], ['b', '5672', [5672]], ['c', '8080', [8080]]] as const) {
      assert.deepEqual(statusOf(review(uid, ports))['inboundProxyProtocol'], expected, uid);
    }
  });

  it('explain and inject say what the app sees on those ports; explain --mode policy says policy mode ignores it', () => {
    const admission = admit(pod({ ...CAPTURE, [ASK]: '5672,8080' }));
    assert.ok(admission.capture !== undefined);
    const explained = explainCapture(admission.capture, admission.tcpProbes, admission.proxyProtocol);
    assert.deepEqual(explained.inboundProxyProtocol?.ports, [5672, 8080]);
    assert.ok(
      captureLines(explained).includes(
        "the app sees as its client on ports 5672,8080: the Pod's own address as its peer, and the client's own address and port in the PROXY protocol v1 header the proxy sends first (envoy-injector.io/inbound-proxy-protocol): the app must read it",
      ),
      captureLines(explained).join('\n'),
    );
    const report = { ...admission, kind: 'Pod', name: 'queue', namespace: 'shop' } as Parameters<typeof toExplanation>[0];
    assert.ok(toExplanation(report, 'policy').warnings.some((warning) => warning.startsWith('policy mode ignores envoy-injector.io/inbound-proxy-protocol')));
    assert.ok(!toExplanation(report, 'webhook').warnings.some((warning) => warning.startsWith('policy mode')));
  });
});
