import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { PatchMemo } from '../src/admission/index.js';
import { storedThroughReview } from './helpers/reviews.js';
import { TemplateError } from '../src/errors.js';
import { admitPod, applyPodPatch, parseTemplateData, parseYaml, type Admission, type JsonObject, type TemplateSet } from '../src/injection/index.js';
import { captureLines, explainCapture } from '../src/commands/capture-text.js';
import { toExplanation } from '../src/commands/explain.js';
import { bootstrapProblems, mergeBootstraps } from './helpers/envoy-bootstrap.js';
import { only, renderChart } from './helpers/helm.js';

/**
 * TPROXY interception (issue 41, part 4, docs/design.md §11): which Pods get
 * it, what the patch adds (envoy-init's mode and port, the proxy's root and
 * NET_ADMIN, the transparent listener in the per-Pod bootstrap, the status),
 * where it is refused with a warning (CNI mode, a template without the
 * listener's port; Pod Security leaves capture out before), and that the
 * proxy's bootstrap, merged as Envoy merges it, passes the bootstrap check.
 */

type Obj = Record<string, unknown>;
let templates: TemplateSet;
let tproxyDefault: TemplateSet;
let withoutPort: TemplateSet;
let cniTemplates: TemplateSet;
const chartTemplates = async (values: Obj): Promise<TemplateSet> => parseTemplateData(only(await renderChart(values), 'ConfigMap', 'envoy-initializer')['data'] as Record<string, string>);
before(async () => {
  templates = await chartTemplates({});
  tproxyDefault = await chartTemplates({ proxy: { capture: { interception: 'tproxy' } } });
  withoutPort = await chartTemplates({ proxy: { capture: { tproxyPort: 0 } } });
  cniTemplates = await chartTemplates({ proxy: { capture: { mode: 'cni' } } });
});

const CAPTURE = { 'envoy-injector.io/capture': 'true' };
const ASK = 'envoy-injector.io/capture-interception';
const TPROXY = { ...CAPTURE, [ASK]: 'tproxy' };
/** The namespace label by which the platform team lets a namespace's Pods ask for TPROXY (issue 50). */
const ALLOWED = { 'envoy-injector.io/allow-tproxy': 'true' };

function pod(annotations: Record<string, string>): JsonObject {
  return { apiVersion: 'v1', kind: 'Pod', metadata: { name: 'shop', annotations: { 'envoy-injector.io/inject': 'true', ...annotations } }, spec: { containers: [{ name: 'app', image: 'a:1' }] } } as JsonObject;
}
function admit(received: JsonObject, set: TemplateSet = templates, namespaceLabels: Record<string, string> = ALLOWED): Admission & { injected: Obj } {
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels, pod: received, templates: set, options: { nativeSidecar: true } });
  assert.ok(admission.injection !== undefined, 'the Pod is injected');
  return { ...admission, injected: applyPodPatch(received, admission.injection.patch) as Obj };
}
const annotationOf = (injected: Obj, key: string): string | undefined => ((injected['metadata'] as Obj)['annotations'] as Record<string, string>)[key];
const initOf = (injected: Obj, name: string): Obj | undefined => (((injected['spec'] as Obj)['initContainers'] as Obj[]) ?? []).find((container) => container['name'] === name);
const statusOf = (injected: Obj): Obj => JSON.parse(annotationOf(injected, 'envoy-injector.io/status') ?? '{}') as Obj;

describe('TPROXY interception', () => {
  it('a Pod asking tproxy: envoy-init in TPROXY mode to the transparent listener, the proxy root with NET_ADMIN, the listener in its bootstrap, the status', () => {
    const { injected, warnings, capture } = admit(pod(TPROXY));
    assert.deepEqual(warnings, []);
    assert.equal(capture?.capture === true ? capture.interception : undefined, 'tproxy');
    const args = initOf(injected, 'envoy-init')?.['args'] as string[];
    assert.ok(args.includes('--inbound-port=15007') && args.at(-1) === '--interception=tproxy', args.join(' '));
    const context = initOf(injected, 'envoy')?.['securityContext'] as Obj;
    assert.deepEqual([context['runAsUser'], context['runAsGroup'], context['runAsNonRoot'], context['capabilities']], [0, 1337, false, { drop: ['ALL'], add: ['NET_ADMIN'] }]);
    assert.equal(context['allowPrivilegeEscalation'], false);
    const resources = (JSON.parse(annotationOf(injected, 'envoy-injector.io/proxy-config') ?? '{}') as Obj)['static_resources'] as { listeners: Obj[]; clusters: Obj[] };
    const listener = resources.listeners.find((candidate) => candidate['name'] === 'inbound_tproxy');
    assert.equal(listener?.['transparent'], true);
    assert.deepEqual((listener?.['listener_filters'] as Obj[]).map((filter) => filter['name']), ['envoy.filters.listener.original_dst', 'envoy.filters.listener.original_src']);
    assert.equal(statusOf(injected)['interception'], 'tproxy');
  });

  it('a REDIRECT Pod is as before: no --interception, no NET_ADMIN in the proxy, no transparent listener, no status field', () => {
    for (const annotations of [CAPTURE, { ...CAPTURE, [ASK]: 'redirect' }]) {
      const { injected, warnings } = admit(pod(annotations));
      assert.deepEqual(warnings, []);
      assert.ok(!(initOf(injected, 'envoy-init')?.['args'] as string[]).some((arg) => arg.startsWith('--interception')));
      assert.ok((initOf(injected, 'envoy-init')?.['args'] as string[]).includes('--inbound-port=15006'));
      assert.equal((initOf(injected, 'envoy')?.['securityContext'] as Obj)['runAsUser'], 1337);
      assert.ok(!(annotationOf(injected, 'envoy-injector.io/proxy-config') ?? '').includes('transparent'));
      assert.equal(statusOf(injected)['interception'], undefined);
    }
    // The template's default tproxy; a Pod's redirect wins.
    assert.equal(statusOf(admit(pod(CAPTURE), tproxyDefault).injected)['interception'], 'tproxy');
    assert.equal(statusOf(admit(pod({ ...CAPTURE, [ASK]: 'redirect' }), tproxyDefault).injected)['interception'], undefined);
  });

  it("the TPROXY proxy is hardened whatever the template's own securityContext: drop ALL, add NET_ADMIN only, no privilege escalation, not privileged", () => {
    const hardened = { runAsUser: 0, runAsGroup: 1337, runAsNonRoot: false, privileged: false, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'], add: ['NET_ADMIN'] } };
    const contexts: Obj[] = [
      {},
      { runAsUser: 1337 },
      { runAsUser: 1337, allowPrivilegeEscalation: true, privileged: true, capabilities: { add: ['NET_RAW', 'SYS_ADMIN'], drop: ['KILL'] } },
      { runAsUser: 1337, capabilities: { add: ['NET_ADMIN', 'NET_ADMIN'] }, readOnlyRootFilesystem: true, seccompProfile: { type: 'RuntimeDefault' } },
    ];
    for (const context of contexts) {
      const envoy = JSON.stringify({ name: 'envoy', image: 'e:1', securityContext: context });
      const own = parseTemplateData({ config: `containers: [${envoy}]\ncapture: {image: "init:1", proxyUid: 1337, outboundPort: 15001, inboundPort: 15006, proxyPorts: [9901], interception: tproxy, tproxyPort: 15007}\n` });
      const { injected, capture } = admit(pod(CAPTURE), own);
      assert.equal(capture?.capture === true ? capture.interception : undefined, 'tproxy');
      const stored = (initOf(injected, 'envoy')?.['securityContext'] ?? {}) as Obj;
      // What the template says beyond the privileges is kept (read-only root, seccomp); the privileges are ours.
      const kept = Object.fromEntries(Object.entries(context).filter(([key]) => !(key in hardened)));
      assert.deepEqual(stored, { ...kept, ...hardened }, JSON.stringify(context));
    }
  });

  it('TPROXY is the platform team\'s to allow: a Pod alone asking gets REDIRECT and a warning; the template or the namespace\'s label allows it', async () => {
    const refusal = (template: string, namespace: string): string =>
      `${ASK}: tproxy is not allowed for this Pod: its proxy would run as root with NET_ADMIN, which neither template "${template}" (capture.allowTproxy, capture.interception: tproxy) nor ${namespace} allows; captured by REDIRECT instead (the app sees its own Pod as the client)`;
    const cases: [string, TemplateSet, Record<string, string> | undefined, string | undefined][] = [
      ['a Pod alone', templates, {}, refusal('config', 'the label envoy-injector.io/allow-tproxy: "true" of namespace "shop"')],
      ['a label of another value', templates, { 'envoy-injector.io/allow-tproxy': 'yes' }, refusal('config', 'the label envoy-injector.io/allow-tproxy: "true" of namespace "shop" (it is "yes")')],
      ['labels unknown (offline)', templates, undefined, refusal('config', 'the label envoy-injector.io/allow-tproxy: "true" of namespace "shop"')],
      ['the namespace\'s label', templates, ALLOWED, undefined],
      ['the template\'s capture.allowTproxy', await chartTemplates({ proxy: { capture: { allowTproxy: true } } }), {}, undefined],
      ['the template\'s default', tproxyDefault, {}, undefined],
    ];
    for (const [what, set, labels, warning] of cases) {
      const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: labels, pod: pod(TPROXY), templates: set, options: { nativeSidecar: true } });
      assert.ok(admission.injection !== undefined && admission.capture?.capture === true, `${what}: injected and captured`);
      const injected = applyPodPatch(pod(TPROXY), admission.injection.patch) as Obj;
      const context = initOf(injected, 'envoy')?.['securityContext'] as Obj;
      if (warning === undefined) {
        assert.deepEqual([admission.warnings, admission.capture.interception, context['runAsUser']], [[], 'tproxy', 0], what);
      } else {
        assert.deepEqual(admission.warnings, [warning], what);
        assert.deepEqual([admission.capture.interception, context['runAsUser'], statusOf(injected)['interception']], ['redirect', 1337, undefined], what);
        assert.ok(!(initOf(injected, 'envoy-init')?.['args'] as string[]).includes('--interception=tproxy'), what);
      }
    }
    // Asking for REDIRECT needs no allowance; a template's default TPROXY is left by it.
    assert.deepEqual(admit(pod({ ...CAPTURE, [ASK]: 'redirect' }), tproxyDefault, {}).warnings, []);
  });

  it('where TPROXY cannot be: a warning, and REDIRECT; never an invalid Pod nor one left uncaptured', () => {
    const cases: [Record<string, string>, TemplateSet, Record<string, string>, string][] = [
      [{ ...CAPTURE, [ASK]: 'TPROXY' }, templates, ALLOWED, `${ASK}: "TPROXY" is not one of redirect, tproxy; ignored, redirect applies`],
      [TPROXY, withoutPort, ALLOWED, `${ASK}: tproxy needs a transparent listener, and the template has no capture.tproxyPort; captured by REDIRECT instead (the app sees its own Pod as the client)`],
      [TPROXY, cniTemplates, ALLOWED, `${ASK}: tproxy cannot be done where the template captures in CNI mode: the node plugin installs the REDIRECT rules only; captured by REDIRECT instead (the app sees its own Pod as the client)`],
    ];
    for (const [annotations, set, labels, warning] of cases) {
      const { injected, warnings, capture } = admit(pod(annotations), set, labels);
      assert.ok(warnings.includes(warning), warnings.join('\n'));
      assert.ok(capture?.capture === true && capture.interception === 'redirect');
      assert.equal(statusOf(injected)['interception'], undefined);
    }
    // Pod Security baseline: initContainer mode leaves capture out (NET_ADMIN in envoy-init and in the proxy); CNI mode is REDIRECT's.
    const baseline = { ...ALLOWED, 'pod-security.kubernetes.io/enforce': 'baseline' };
    const forbidden = admit(pod(TPROXY), templates, baseline);
    assert.equal(forbidden.capture?.reason, 'pod_security');
    assert.equal(initOf(forbidden.injected, 'envoy')?.['securityContext'] !== undefined && (initOf(forbidden.injected, 'envoy')?.['securityContext'] as Obj)['runAsUser'], 1337);
    const auto = admit(pod(TPROXY), parseTemplateData({ config: autoTemplate() }), baseline);
    assert.ok(auto.warnings.some((warning) => warning.startsWith(`${ASK}: tproxy cannot be done where CNI mode serves this namespace`)), auto.warnings.join('\n'));
  });

  it('the template: interception and tproxyPort checked; tproxy needs the port, and is never CNI mode\'s', () => {
    const problemsOf = (capture: string): string[] => {
      try {
        parseTemplateData({ config: `containers: [{name: envoy, image: "e:1", securityContext: {runAsUser: 1337}}]\ncapture: {image: "init:1", outboundPort: 15001, inboundPort: 15006, proxyPorts: [9901], ${capture}}\n` });
        return [];
      } catch (error) {
        assert.ok(error instanceof TemplateError);
        return error.problems.map(String);
      }
    };
    assert.deepEqual(problemsOf('interception: tproxy, tproxyPort: 15007'), []);
    assert.deepEqual(problemsOf('allowTproxy: true, tproxyPort: 15007'), []);
    assert.deepEqual(problemsOf('allowTproxy: "yes", tproxyPort: 15007'), ['config: capture.allowTproxy: must be true or false']);
    assert.deepEqual(problemsOf('allowTproxy: true'), ['config: capture.allowTproxy: TPROXY needs capture.tproxyPort (the port of the transparent listener)']);
    assert.deepEqual(problemsOf('mode: cni, checkImage: "i:1", allowTproxy: true, tproxyPort: 15007'), [
      "config: capture.allowTproxy: TPROXY cannot be CNI mode's: the node plugin installs the REDIRECT rules only, and the proxy's NET_ADMIN is what Pod Security forbids",
    ]);
    assert.deepEqual(problemsOf('interception: TPROXY'), ['config: capture.interception: "TPROXY" is not one of redirect, tproxy']);
    assert.deepEqual(problemsOf('interception: tproxy'), ['config: capture.interception: tproxy needs capture.tproxyPort (the port of the transparent listener)']);
    assert.deepEqual(problemsOf('tproxyPort: 9901'), ["config: capture.tproxyPort: 9901 is taken by another of the proxy's listeners (outboundPort, inboundPort, proxyPorts)"]);
    assert.deepEqual(problemsOf('tproxyPort: 0'), ['config: capture.tproxyPort: 0 is not a port (1-65535)']);
    assert.deepEqual(problemsOf('mode: cni, checkImage: "i:1", interception: tproxy, tproxyPort: 15007'), [
      "config: capture.interception: tproxy cannot be CNI mode's: the node plugin installs the REDIRECT rules only, and the proxy's NET_ADMIN is what Pod Security forbids",
    ]);
  });

  it('merged under the chart\'s bootstrap, the proxy\'s bootstrap passes the bootstrap check; the check has teeth', () => {
    const { injected, capture } = admit(pod(TPROXY));
    const envoy = initOf(injected, 'envoy') ?? {};
    const fromPath = JSON.parse(annotationOf(injected, 'envoy-injector.io/proxy-config') ?? '{}') as Obj;
    const fromYaml = parseYaml((envoy['args'] as string[])[1] ?? '') as Obj;
    const subject = { container: envoy, capture: capture?.capture === true ? capture.settings : undefined };
    assert.deepEqual(bootstrapProblems({ ...subject, bootstrap: mergeBootstraps(fromPath, fromYaml) }), []);
    const broken = (from: string, to: string, container: Obj = envoy): string[] =>
      bootstrapProblems({ ...subject, container, bootstrap: mergeBootstraps(JSON.parse(JSON.stringify(fromPath).replace(from, to)) as Obj, fromYaml) });
    assert.deepEqual(broken('"mark":1337', '"mark":1338'), ["listener inbound_tproxy: original_src's mark 1338 is not the rules' 0x539 (1337)"]);
    assert.deepEqual(broken('"mark":1337', '"mark":1337,"bind_address":true'), ['listeners[0].listener_filters.original_src.bind_address: not a field of original_src']);
    assert.deepEqual(broken('"destination_port":15007', '"destination_port":15008'), ['listener inbound_tproxy: a connection to its own port must not be proxied back to it']);
    assert.deepEqual(broken('"transparent":true', '"transparent":true,"freebind":true'), ['listeners[0].freebind: not a field of listener']);
    const unprivileged = { ...envoy, securityContext: { ...(envoy['securityContext'] as Obj), runAsUser: 1337 } };
    assert.deepEqual(broken('', '', unprivileged), ['listener inbound_tproxy: a transparent socket needs the proxy to run as root with NET_ADMIN (capabilities lost at exec otherwise)']);
    const rootWithMore = { ...envoy, securityContext: { ...(envoy['securityContext'] as Obj), capabilities: { add: ['NET_ADMIN', 'NET_RAW'] } } };
    assert.deepEqual(broken('', '', rootWithMore), ['listener inbound_tproxy: the proxy runs as root, so it must drop ALL, add NET_ADMIN only, and allow no privilege escalation']);
  });

  it('a container running as the proxy\'s group gets a warning under TPROXY only (the rules let that group out)', () => {
    const grouped = { ...pod(TPROXY), spec: { containers: [{ name: 'app', image: 'a:1', securityContext: { runAsGroup: 1337 } }] } } as JsonObject;
    const warning = 'container "app" runs as group 1337 (its securityContext.runAsGroup), the proxy\'s group under TPROXY: the capture rules let that group\'s traffic past the proxy; run it as another group';
    assert.ok(admit(grouped).warnings.includes(warning), admit(grouped).warnings.join('\n'));
    const redirect = { ...grouped, metadata: { name: 'shop', annotations: { 'envoy-injector.io/inject': 'true', ...CAPTURE } } } as JsonObject;
    assert.deepEqual(admit(redirect).warnings, []);
  });

  it('with the PROXY protocol asked too: TPROXY, and a warning that no header is sent', () => {
    const { warnings, proxyProtocol } = admit(pod({ ...TPROXY, 'envoy-injector.io/inbound-proxy-protocol': '8080' }));
    assert.deepEqual(proxyProtocol?.ports, []);
    assert.ok(warnings.some((warning) => warning.startsWith('envoy-injector.io/inbound-proxy-protocol: the Pod is captured by TPROXY')), warnings.join('\n'));
  });

  it('a reinvocation changes nothing; the webhook keys its patch memo on the interception', () => {
    const { injected } = admit(pod(TPROXY));
    const again = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: injected as JsonObject, templates, options: { nativeSidecar: true } });
    assert.equal(again.decision.reason, 'already_injected');
    const memo = new PatchMemo();
    const review = (uid: string, interception: string): Obj =>
      storedThroughReview(pod({ ...CAPTURE, [ASK]: interception }), uid, 'shop', { templates, namespaceLabels: ALLOWED, options: { nativeSidecar: true }, memo }) as Obj;
    for (const [uid, interception, expected] of [['a', 'tproxy', 'tproxy'], ['b', 'redirect', undefined], ['c', 'tproxy', 'tproxy']] as const) {
      assert.equal(statusOf(review(uid, interception))['interception'], expected, uid);
    }
    // The same Pod in a namespace that does not allow it, after the allowed one's answer is memoised: REDIRECT.
    const refused = storedThroughReview(pod(TPROXY), 'd', 'shop', { templates, namespaceLabels: {}, options: { nativeSidecar: true }, memo }) as Obj;
    assert.equal(statusOf(refused)['interception'], undefined);
  });
});

describe('TPROXY in the chart', () => {
  it('renders tproxyPort (0: none), interception when not redirect and allowTproxy; helm fails on tproxy with CNI mode, without the port or with mode policy', async () => {
    assert.equal(templates.defaultTemplate.capture?.tproxyPort, 15007);
    assert.equal(templates.defaultTemplate.capture?.interception, 'redirect');
    assert.equal(withoutPort.defaultTemplate.capture?.tproxyPort, undefined);
    assert.equal(tproxyDefault.defaultTemplate.capture?.interception, 'tproxy');
    for (const capture of [{ interception: 'tproxy', mode: 'cni' }, { interception: 'tproxy', tproxyPort: 0 }]) {
      await assert.rejects(renderChart({ proxy: { capture } }), /proxy\.capture\.interception: tproxy needs proxy\.capture\.tproxyPort \(its transparent listener\) and cannot be proxy\.capture\.mode cni's/, JSON.stringify(capture));
    }
    await assert.rejects(renderChart({ mode: 'policy', proxy: { capture: { interception: 'tproxy' } } }), /proxy\.capture\.interception: tproxy is the webhook's only: mode policy captures by REDIRECT/);
    // The allowance (issue 50): off by default, rendered when on, with the same limits.
    assert.equal(templates.defaultTemplate.capture?.allowTproxy, false);
    assert.equal((await chartTemplates({ proxy: { capture: { allowTproxy: true } } })).defaultTemplate.capture?.allowTproxy, true);
    for (const capture of [{ allowTproxy: true, mode: 'cni' }, { allowTproxy: true, tproxyPort: 0 }]) {
      await assert.rejects(renderChart({ proxy: { capture } }), /proxy\.capture\.allowTproxy: TPROXY needs proxy\.capture\.tproxyPort \(its transparent listener\) and cannot be proxy\.capture\.mode cni's/, JSON.stringify(capture));
    }
    await assert.rejects(renderChart({ mode: 'policy', proxy: { capture: { allowTproxy: true } } }), /proxy\.capture\.allowTproxy: TPROXY is the webhook's only: mode policy captures by REDIRECT/);
    await assert.rejects(renderChart({ proxy: { capture: { allowTproxy: 'yes' } } }), /at '\/proxy\/capture\/allowTproxy': got string, want boolean/);
    await assert.rejects(renderChart({ proxy: { capture: { interception: 'TPROXY' } } }), /at '\/proxy\/capture\/interception': value must be one of 'redirect', 'tproxy'/);
  });
});

describe('TPROXY in explain and inject', () => {
  it('explain and inject say what the app sees and where inbound goes; explain --mode policy says policy mode captures by REDIRECT', () => {
    const admission = admit(pod(TPROXY));
    assert.ok(admission.capture !== undefined);
    const explained = explainCapture(admission.capture, admission.tcpProbes, admission.proxyProtocol);
    assert.equal(explained.interception, 'tproxy');
    assert.equal(explained.rules?.inboundPort, 15007);
    const lines = captureLines(explained);
    assert.ok(lines.some((line) => line.startsWith('inbound TCP -> port 15007 by TPROXY (transparent listener), ports all')), lines.join('\n'));
    assert.ok(lines.some((line) => line.startsWith('outbound TCP -> port 15001, except uid 1337 and gid 1337, loopback')), lines.join('\n'));
    assert.ok(lines.includes("the app sees as its client: each client's own address: TPROXY keeps it, and the proxy's transparent listener connects to the app from it (Envoy's original_src); the proxy runs as root with NET_ADMIN (envoy-injector.io/capture-interception)"), lines.join('\n'));
    const redirect = admit(pod(CAPTURE));
    assert.ok(redirect.capture !== undefined);
    assert.ok(captureLines(explainCapture(redirect.capture, redirect.tcpProbes, redirect.proxyProtocol)).some((line) => line.startsWith("the app sees as its client: the Pod's own address")));
    const report = { ...admission, kind: 'Pod', name: 'shop', namespace: 'shop' } as Parameters<typeof toExplanation>[0];
    assert.ok(toExplanation(report, 'policy').warnings.some((warning) => warning.startsWith('policy mode captures this Pod by REDIRECT, not TPROXY')));
    assert.ok(!toExplanation(report, 'webhook').warnings.some((warning) => warning.startsWith('policy mode')));
    // Not allowed (issue 50): both modes capture by REDIRECT, so policy mode has nothing to add to the webhook's warning.
    const refused = admit(pod(TPROXY), templates, {});
    const refusedReport = { ...refused, kind: 'Pod', name: 'shop', namespace: 'shop' } as Parameters<typeof toExplanation>[0];
    const policyWarnings = toExplanation(refusedReport, 'policy').warnings;
    assert.ok(policyWarnings.some((warning) => warning.startsWith(`${ASK}: tproxy is not allowed for this Pod`)) && !policyWarnings.some((warning) => warning.startsWith('policy mode')), policyWarnings.join('\n'));
  });
});

/** A template in auto mode with TPROXY possible: envoy-init where Pod Security allows it, CNI mode elsewhere. */
function autoTemplate(): string {
  return [
    'containers: [{name: envoy, image: "e:1", securityContext: {runAsUser: 1337}}]',
    'capture: {image: "init:1", mode: auto, checkImage: "i:1", outboundPort: 15001, inboundPort: 15006, proxyPorts: [9901], tproxyPort: 15007}',
    '',
  ].join('\n');
}
