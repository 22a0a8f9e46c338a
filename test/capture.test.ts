import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { mkdtemp, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  admitPod,
  applyPodPatch,
  captureListProblem,
  formatYaml,
  parseTemplateData,
  parseTemplateFile,
  Reason,
  type Admission,
  type JsonObject,
  type TemplateSet,
} from '../src/injection/index.js';
import { PatchMemo, reviewAdmission, type AdmissionRequest } from '../src/admission/index.js';
import { runCli } from '../src/cli.js';
import { TemplateError } from '../src/errors.js';
import { ROOT } from './helpers/fixtures.js';

const templates: TemplateSet = parseTemplateFile(readFileSync(join(ROOT, 'test/golden/capture-templates.yaml'), 'utf8'));

type Obj = Record<string, unknown>;

function pod(annotations: Record<string, string>, spec: Obj = {}): JsonObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', annotations: { 'envoy-injector.io/inject': 'true', ...annotations } }, spec: { containers: [{ name: 'app', image: 'nginx:1.27' }], ...spec } } as JsonObject;
}

function admit(received: JsonObject, namespaceLabels: Record<string, string> = {}, native = false): Admission & { injected: Obj } {
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels, pod: received, templates, options: { nativeSidecar: native } });
  assert.ok(admission.injection !== undefined, 'the Pod is injected');
  return { ...admission, injected: applyPodPatch(received, admission.injection.patch) as Obj };
}

const initOf = (injected: Obj): Obj | undefined => (((injected['spec'] as Obj)['initContainers'] as Obj[] | undefined) ?? []).find((container) => container['name'] === 'envoy-init');
const argsOf = (injected: Obj): Record<string, string> => {
  const init = initOf(injected);
  assert.ok(init !== undefined, 'envoy-init was injected');
  return Object.fromEntries((init['args'] as string[]).map((arg) => [arg.slice(2, arg.indexOf('=')), arg.slice(arg.indexOf('=') + 1)]));
};

describe('traffic capture: the decision and the envoy-init container', () => {
  it('a Pod annotated capture "true" gets envoy-init as described: root with NET_ADMIN and NET_RAW only, read-only, its own resources', () => {
    const { injected, capture, warnings } = admit(pod({ 'envoy-injector.io/capture': 'true' }));
    assert.equal(capture?.capture, true);
    assert.equal(capture?.reason, 'annotation_true');
    assert.deepEqual(warnings, []);
    const init = initOf(injected);
    assert.deepEqual(init, {
      name: 'envoy-init',
      image: 'envoy-injector-init:0.1.0',
      imagePullPolicy: 'IfNotPresent',
      args: [
        '--proxy-uid=1337',
        '--outbound-port=15001',
        '--inbound-port=15006',
        '--proxy-ports=9901,9902',
        '--exclude-outbound-cidrs=169.254.169.254/32',
        '--exclude-outbound-ports=',
        '--exclude-inbound-ports=15090',
        '--include-inbound-ports=',
      ],
      resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
      securityContext: {
        runAsUser: 0,
        runAsGroup: 0,
        runAsNonRoot: false,
        privileged: false,
        allowPrivilegeEscalation: false,
        readOnlyRootFilesystem: true,
        capabilities: { add: ['NET_ADMIN', 'NET_RAW'], drop: ['ALL'] },
      },
      volumeMounts: [{ name: 'envoy-init-xtables-lock', mountPath: '/run' }],
    });
    assert.deepEqual((injected['spec'] as Obj)['volumes'], [{ name: 'envoy-init-xtables-lock', emptyDir: {} }]);
  });

  it('each exclusion annotation replaces the template default of its list; "" means none', () => {
    const { injected, warnings } = admit(
      pod({
        'envoy-injector.io/capture': 'true',
        'envoy-injector.io/capture-exclude-outbound-cidrs': '10.96.0.0/12,fd00:10:96::/112',
        'envoy-injector.io/capture-exclude-outbound-ports': '5432',
        'envoy-injector.io/capture-exclude-inbound-ports': '',
        'envoy-injector.io/capture-include-inbound-ports': '8080,8443',
      }),
    );
    assert.deepEqual(warnings, []);
    const args = argsOf(injected);
    assert.equal(args['exclude-outbound-cidrs'], '10.96.0.0/12,fd00:10:96::/112');
    assert.equal(args['exclude-outbound-ports'], '5432');
    assert.equal(args['exclude-inbound-ports'], '');
    assert.equal(args['include-inbound-ports'], '8080,8443');
    // The proxy's own ports stay excluded whatever the Pod says.
    assert.equal(args['proxy-ports'], '9901,9902');
  });

  it('a bad exclusion is ignored with a warning naming it, the default applies, the Pod is still injected and captured', () => {
    const { injected, capture, warnings } = admit(
      pod({
        'envoy-injector.io/capture': 'true',
        'envoy-injector.io/capture-exclude-outbound-cidrs': '10.0.0.0/33',
        'envoy-injector.io/capture-exclude-outbound-ports': '5432, 6379',
        'envoy-injector.io/capture-include-inbound-ports': '0',
      }),
    );
    assert.equal(capture?.capture, true);
    assert.equal(warnings.length, 3, warnings.join('\n'));
    assert.match(warnings[0] ?? '', /^envoy-injector\.io\/capture-exclude-outbound-cidrs: "10\.0\.0\.0\/33" is not a comma-separated list of CIDRs .*; ignored, the default "169\.254\.169\.254\/32" applies$/);
    assert.match(warnings[1] ?? '', /^envoy-injector\.io\/capture-exclude-outbound-ports: "5432, 6379" is not a comma-separated list of ports \(1-65535\), without spaces/);
    assert.match(warnings[2] ?? '', /^envoy-injector\.io\/capture-include-inbound-ports: "0" is not/);
    const args = argsOf(injected);
    assert.equal(args['exclude-outbound-cidrs'], '169.254.169.254/32');
    assert.equal(args['exclude-outbound-ports'], '');
    assert.equal(args['include-inbound-ports'], '');
  });

  it('capture "false", no annotation with the default off, and a bad switch value: injected without envoy-init', () => {
    for (const [annotations, reason, warning] of [
      [{ 'envoy-injector.io/capture': 'false' }, 'annotation_false', undefined],
      [{}, 'not_enabled', undefined],
      [{ 'envoy-injector.io/capture': 'yes' }, 'not_enabled', 'envoy-injector.io/capture: "yes" is not "true" or "false"; ignored'],
      [{ 'envoy-injector.io/template': 'always', 'envoy-injector.io/capture': 'false' }, 'annotation_false', undefined],
    ] as const) {
      const { injected, capture, warnings } = admit(pod(annotations));
      assert.equal(capture?.capture, false, JSON.stringify(annotations));
      assert.equal(capture?.reason, reason);
      assert.deepEqual(warnings, warning === undefined ? [] : [warning]);
      assert.equal(initOf(injected), undefined);
      assert.equal((injected['spec'] as Obj)['volumes'], undefined);
    }
  });

  it('a template whose default is on captures Pods that do not say, with its own uid, image and resources', () => {
    const { injected, capture } = admit(pod({ 'envoy-injector.io/template': 'always' }));
    assert.equal(capture?.reason, 'template_default');
    const init = initOf(injected);
    assert.match(String(init?.['image']), /^registry\.example\.com\/envoy-injector-init@sha256:/);
    assert.equal(argsOf(injected)['proxy-uid'], '1337');
    assert.deepEqual(init?.['resources'], { requests: { cpu: '5m', memory: '8Mi' }, limits: { cpu: '50m', memory: '32Mi' } });
  });

  it('hostNetwork Pods are never captured, with a warning', () => {
    const { injected, capture, warnings } = admit(pod({ 'envoy-injector.io/capture': 'true' }, { hostNetwork: true }));
    assert.equal(capture?.reason, 'host_network');
    assert.equal(initOf(injected), undefined);
    assert.deepEqual(warnings, ["envoy-injector.io/capture: the Pod uses hostNetwork: its traffic is never captured (the rules would change the node's network)"]);
  });

  it('a namespace enforcing Pod Security baseline or restricted: injected without capture, with a warning that says why; privileged captures', () => {
    for (const level of ['baseline', 'restricted']) {
      const { injected, capture, warnings } = admit(pod({ 'envoy-injector.io/capture': 'true' }), { 'pod-security.kubernetes.io/enforce': level });
      assert.equal(capture?.reason, 'pod_security');
      assert.equal(initOf(injected), undefined);
      assert.ok(((injected['spec'] as Obj)['containers'] as Obj[]).some((container) => container['name'] === 'envoy'), 'the proxy is still injected');
      assert.deepEqual(warnings, [
        `namespace "shop" enforces Pod Security "${level}" (pod-security.kubernetes.io/enforce), which forbids the NET_ADMIN capability traffic capture needs: the Pod was injected without traffic capture`,
      ]);
    }
    // Only enforce counts: audit and warn do not refuse Pods.
    for (const labels of [{ 'pod-security.kubernetes.io/enforce': 'privileged' }, { 'pod-security.kubernetes.io/warn': 'restricted', 'pod-security.kubernetes.io/audit': 'baseline' }]) {
      assert.equal(admit(pod({ 'envoy-injector.io/capture': 'true' }), labels).capture?.capture, true, JSON.stringify(labels));
    }
  });

  it('envoy-init runs after the Pod\'s init containers with classic sidecars, and first, before the proxy, with native ones', () => {
    const withInit = pod({ 'envoy-injector.io/capture': 'true' }, { initContainers: [{ name: 'migrate', image: 'migrate:3' }] });
    const names = (injected: Obj): unknown[] => ((injected['spec'] as Obj)['initContainers'] as Obj[]).map((container) => container['name']);
    assert.deepEqual(names(admit(withInit).injected), ['migrate', 'envoy-init']);
    assert.deepEqual(names(admit(withInit, {}, true).injected), ['envoy-init', 'envoy', 'migrate']);
  });

  it('a Pod with its own container of the proxy\'s name is not injected at all: no rules without a proxy of ours behind them (proxy_name_taken)', () => {
    const own = pod({ 'envoy-injector.io/capture': 'true' }, { containers: [{ name: 'app', image: 'nginx:1.27' }, { name: 'envoy', image: 'my-envoy:1' }] });
    const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: own, templates, options: {} });
    assert.equal(admission.decision.reason, Reason.proxyNameTaken);
    assert.equal(admission.injection, undefined);
    assert.equal(admission.capture, undefined);
  });

  it('a Pod that already has a container named envoy-init keeps its own, with the merge\'s warning', () => {
    const own = pod({ 'envoy-injector.io/capture': 'true' }, { initContainers: [{ name: 'envoy-init', image: 'mine:1' }] });
    const { injected, warnings } = admit(own);
    assert.equal(initOf(injected)?.['image'], 'mine:1');
    assert.deepEqual(warnings, ['initContainers "envoy-init" from template "config" is already in the Pod; kept the Pod\'s own']);
  });

  it('a template without capture settings never captures; a Pod that asks is told why', () => {
    const plain = parseTemplateData({ config: 'containers: [{name: envoy, image: "envoyproxy/envoy:v1.39.6"}]\n' });
    const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: pod({ 'envoy-injector.io/capture': 'true' }), templates: plain, options: {} });
    assert.equal(admission.capture?.reason, 'no_capture_settings');
    assert.deepEqual(admission.warnings, ['envoy-injector.io/capture: template "config" has no capture settings; the Pod\'s traffic is not captured']);
  });
});

describe("traffic capture: an app running as the proxy's uid (issue 35)", () => {
  const warning = (container: string, where: string) =>
    `container "${container}" runs as user 1337 (${where}), the proxy's uid: the capture rules let that user's traffic past the proxy; run it as another user`;

  it("warns for every container whose effective runAsUser (its own, else the Pod's) is the proxy's uid, when capture is on", () => {
    const received = pod(
      { 'envoy-injector.io/capture': 'true' },
      {
        securityContext: { runAsUser: 1337 },
        initContainers: [{ name: 'migrate', image: 'migrate:1' }],
        containers: [
          { name: 'app', image: 'nginx:1.27' },
          { name: 'own', image: 'x:1', securityContext: { runAsUser: 1000 } },
          { name: 'worker', image: 'x:1', securityContext: { runAsUser: 1337 } },
        ],
      },
    );
    const { capture, warnings } = admit(received);
    assert.equal(capture?.capture, true, 'still captured: a warning, never a refusal');
    assert.deepEqual(warnings, [
      warning('migrate', "the Pod's securityContext.runAsUser"),
      warning('app', "the Pod's securityContext.runAsUser"),
      warning('worker', 'its securityContext.runAsUser'),
    ]);
  });

  it('no warning without capture, or for another uid, or for a container whose user the Pod does not set (the image decides)', () => {
    assert.deepEqual(admit(pod({ 'envoy-injector.io/capture': 'false' }, { securityContext: { runAsUser: 1337 } })).warnings, []);
    assert.deepEqual(admit(pod({ 'envoy-injector.io/capture': 'true' }, { securityContext: { runAsUser: 101 } })).warnings, []);
    assert.deepEqual(admit(pod({ 'envoy-injector.io/capture': 'true' })).warnings, []);
  });

  it('the webhook answers with it (computed per request, never memoised), and inject and explain print it', async () => {
    const received = pod({ 'envoy-injector.io/capture': 'true' }, { containers: [{ name: 'app', image: 'nginx:1.27', securityContext: { runAsUser: 1337 } }] });
    const memo = new PatchMemo();
    const request = (uid: string, object: JsonObject) =>
      ({ uid, kind: { group: '', version: 'v1', kind: 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, operation: 'CREATE', namespace: 'shop', object }) as AdmissionRequest;
    const plain = pod({ 'envoy-injector.io/capture': 'true' }, { containers: [{ name: 'app', image: 'nginx:1.27', securityContext: { runAsUser: 1000 } }] });
    reviewAdmission(request('a', plain), { templates, namespaceLabels: {}, options: {}, memo });
    const answered = reviewAdmission(request('b', received), { templates, namespaceLabels: {}, options: {}, memo });
    assert.deepEqual(answered.review.response.warnings, [warning('app', 'its securityContext.runAsUser')]);
    const file = join(await mkdtemp(join(tmpdir(), 'ei-uid-')), 'pod.yaml');
    await writeFile(file, formatYaml(received));
    const templateFile = ['--template-file', join(ROOT, 'test/golden/capture-templates.yaml')];
    for (const command of ['inject', 'explain']) {
      let output = '';
      const write = (chunk: string) => (output += chunk);
      await runCli([command, '-f', file, ...templateFile], { stdin: process.stdin, stdout: { write }, stderr: { write } });
      assert.ok(output.includes(warning('app', 'its securityContext.runAsUser')), `${command}:\n${output}`);
    }
  });
});

describe('traffic capture: the template\'s capture section', () => {
  const problemsOf = (capture: string, proxy = '{name: envoy, image: "e:1"}'): string[] => {
    try {
      parseTemplateData({ config: `containers: [${proxy}]\ncapture: ${capture}\n` });
      return [];
    } catch (error) {
      assert.ok(error instanceof TemplateError);
      return error.problems.map(String);
    }
  };

  it('takes the proxy uid from the proxy container when not given', () => {
    const set = parseTemplateData({ config: 'containers: [{name: envoy, image: "e:1", securityContext: {runAsUser: 101}}]\ncapture: {image: "init:1", outboundPort: 15001, inboundPort: 15006}\n' });
    assert.equal(set.defaultTemplate.capture?.proxyUid, 101);
    assert.equal(set.defaultTemplate.capture?.enabled, false);
  });

  it('refuses a template whose own entries take the names capture adds', () => {
    assert.deepEqual(problemsOf('{image: "init:1", proxyUid: 101, outboundPort: 15001, inboundPort: 15006}\ninitContainers: [{name: envoy-init, image: "x:1"}]\nvolumes: [{name: envoy-init-xtables-lock, emptyDir: {}}]'), [
      'config: initContainers: "envoy-init" is the name traffic capture adds; rename it, or remove the capture section',
      'config: volumes: "envoy-init-xtables-lock" is the name traffic capture adds; rename it, or remove the capture section',
    ]);
  });

  it('names every problem, and rejects the template', () => {
    assert.deepEqual(problemsOf('{outboundPort: 15001, inboundPort: 15001, proxyPorts: [0], enabled: "yes", excludeOutboundPorts: "1,2,", colour: red}'), [
      'config: capture.colour: unknown field (capture may hold image, mode, checkImage, imagePullPolicy, proxyUid, outboundPort, inboundPort, proxyPorts, enabled, excludeOutboundCidrs, excludeOutboundPorts, excludeInboundPorts, includeInboundPorts, resources, tcpProbes, inboundHandoff, interception, tproxyPort, allowTproxy)',
      'config: capture.image: required (the envoy-init image)',
      "config: capture.proxyUid: required when the proxy container sets no securityContext.runAsUser (the rules must know the proxy's user)",
      'config: capture.inboundPort: must differ from outboundPort',
      'config: capture.proxyPorts[0]: 0 is not a port (1-65535)',
      'config: capture.enabled: must be true or false',
      'config: capture.excludeOutboundPorts: "1,2," is not a comma-separated list of ports (1-65535), without spaces (example: "5432,6379")',
    ]);
    assert.deepEqual(problemsOf('{image: "Bad Image", proxyUid: -1, outboundPort: 70000, inboundPort: 15006, resources: {requests: {cpu: 2}, limits: {cpu: 1}}}'), [
      'config: capture.image: "Bad Image" is not an image reference (example: "envoyproxy/envoy:v1.31.2")',
      'config: capture.proxyUid: -1 is not a user id',
      'config: capture.outboundPort: 70000 is not a port (1-65535)',
      'config: capture.resources.requests.cpu: must be less than or equal to the limit',
    ]);
  });
});

describe('traffic capture: the exclusion grammar (shared with policy mode)', () => {
  const valid: [kind: 'ports' | 'cidrs', value: string][] = [
    ['ports', ''],
    ['ports', '1'],
    ['ports', '65535'],
    ['ports', '80,443,8080'],
    ['cidrs', '10.0.0.0/8'],
    ['cidrs', '0.0.0.0/0,::/0'],
    ['cidrs', '192.0.2.1/32,2001:db8::/32,fd00:10:96::/112,::1/128,fe80::1:2:3:4/64'],
    ['cidrs', '2001:db8:0:0:0:0:0:1/128'],
  ];
  const invalid: [kind: 'ports' | 'cidrs', value: unknown][] = [
    ['ports', '0'],
    ['ports', '65536'],
    ['ports', '080'],
    ['ports', '80,'],
    ['ports', ',80'],
    ['ports', '80 443'],
    ['ports', 'http'],
    ['ports', 8080],
    ['cidrs', '10.0.0.0'],
    ['cidrs', '10.0.0.256/8'],
    ['cidrs', '10.0.0.0/33'],
    ['cidrs', '010.0.0.0/8'],
    ['cidrs', '2001:db8::/129'],
    ['cidrs', '2001:db8:::1/64'],
    ['cidrs', '1:2:3:4:5:6:7:8:9/64'],
    ['cidrs', 'example.com/32'],
    ['cidrs', `${'10.0.0.0/8,'.repeat(200)}10.0.0.0/8`],
  ];
  it('accepts lists of ports and of IPv4 and IPv6 CIDRs', () => {
    for (const [kind, value] of valid) assert.equal(captureListProblem(kind, value), undefined, value);
  });
  it('refuses anything else, saying what it wanted', () => {
    for (const [kind, value] of invalid) assert.ok(captureListProblem(kind, value) !== undefined, String(value));
  });
});

describe('traffic capture: what explain and inject say', () => {
  const cli = async (args: string[]): Promise<{ stdout: string; stderr: string }> => {
    let stdout = '';
    let stderr = '';
    const code = await runCli(args, { stdin: process.stdin, stdout: { write: (chunk: string) => (stdout += chunk) }, stderr: { write: (chunk: string) => (stderr += chunk) } });
    assert.equal(code, 0, stderr);
    return { stdout, stderr };
  };
  const files = ['-f', join(ROOT, 'test/golden/capture.yaml'), '--template-file', join(ROOT, 'test/golden/capture-templates.yaml')];

  it('explain in a baseline namespace: injected, capture off, and why', async () => {
    const { stdout } = await cli(['explain', ...files, '--namespace-labels', 'envoy-injector.io/inject=enabled,pod-security.kubernetes.io/enforce=baseline', '-o', 'json']);
    const captured = (JSON.parse(stdout) as { name: string; decision: string; capture: Obj }[]).find((explanation) => explanation.name === 'captured');
    assert.equal(captured?.decision, 'injected');
    assert.deepEqual(captured?.capture, {
      captured: false,
      reason: 'pod_security',
      message: 'namespace "default" enforces Pod Security "baseline" (pod-security.kubernetes.io/enforce), which forbids the NET_ADMIN capability traffic capture needs',
      clientAddress: "each client's own address: inbound connections reach the app directly",
    });
  });

  it('inject -f prints each Pod\'s capture decision and effective exclusions on stderr, the YAML stays on stdout', async () => {
    const { stdout, stderr } = await cli(['inject', ...files]);
    assert.match(stdout, /name: envoy-init/);
    const lines = stderr.split('\n');
    assert.ok(lines.includes('Pod/exclusions: traffic capture ON in initContainer mode: the Pod is annotated envoy-injector.io/capture: "true" [reason annotation_true]'), stderr);
    assert.ok(lines.includes('Pod/exclusions: outbound TCP -> port 15001, except uid 1337, loopback, CIDRs 10.96.0.0/12,fd00:10:96::/112, ports 9901,9902,5432,6379'), stderr);
    assert.ok(lines.includes('Pod/exclusions: inbound TCP -> port 15006, ports 8080,8443, except 9901,9902'), stderr);
    assert.ok(lines.includes('Pod/opted-out: traffic capture off: the Pod is annotated envoy-injector.io/capture: "false" [reason annotation_false]'), stderr);
  });
});

describe('traffic capture: the patch memo', () => {
  it('keys on the capture\'s outcome: one Pod shape in a privileged and a baseline namespace, and with other exclusions, gets the patch computing gives', () => {
    const memo = new PatchMemo();
    const review = (object: JsonObject, labels: Record<string, string>, uid: string, withMemo: boolean) =>
      reviewAdmission(
        { uid, kind: { group: '', version: 'v1', kind: 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, operation: 'CREATE', namespace: 'shop', object } as AdmissionRequest,
        { templates, namespaceLabels: labels, options: {}, ...(withMemo ? { memo } : {}) },
      );
    const shapes: [JsonObject, Record<string, string>][] = [
      [pod({ 'envoy-injector.io/capture': 'true' }), {}],
      [pod({ 'envoy-injector.io/capture': 'true' }), { 'pod-security.kubernetes.io/enforce': 'baseline' }],
      [pod({ 'envoy-injector.io/capture': 'true', 'envoy-injector.io/capture-exclude-outbound-ports': '5432' }), {}],
      [pod({ 'envoy-injector.io/capture': 'true' }, { initContainers: [{ name: 'migrate', image: 'migrate:1' }] }), {}],
      [pod({ 'envoy-injector.io/capture': 'true' }, { initContainers: [{ name: 'envoy-init', image: 'mine:1' }] }), {}],
      [pod({ 'envoy-injector.io/capture': 'true' }, { volumes: [{ name: 'data', emptyDir: {} }] }), {}],
      [pod({ 'envoy-injector.io/capture': 'true' }, { volumes: [{ name: 'envoy-init-xtables-lock', emptyDir: {} }] }), {}],
      [pod({ 'envoy-injector.io/capture': 'true' }), { 'pod-security.kubernetes.io/enforce': 'baseline' }],
      [pod({ 'envoy-injector.io/capture': 'true' }), {}],
    ];
    shapes.forEach(([object, labels], index) => {
      const expected = review(structuredClone(object), labels, `expected-${index}`, false);
      const memoized = review(structuredClone(object), labels, `memo-${index}`, true);
      assert.equal(memoized.review.response.patch, expected.review.response.patch, `shape ${index}`);
      assert.deepEqual(memoized.warnings, expected.warnings, `shape ${index}`);
    });
    assert.equal(memo.size, 7, 'seven shapes, each computed once');
  });
});
