import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  admitPod,
  decideInjection,
  isJsonObject,
  parseTemplateData,
  parseYamlDocuments,
  Reason,
  Rule,
  type DecisionInput,
  type JsonObject,
} from '../src/injection/index.js';
import { repoFile } from './helpers/fixtures.js';

const templates = parseTemplateData({
  config: 'containers: [{name: envoy, image: "envoyproxy/envoy:v1.31.2"}]',
  debug: 'containers: [{name: envoy, image: "envoyproxy/envoy-debug:v1.31.2"}]',
  native: 'containers: [{name: envoy, image: "envoyproxy/envoy:v1.31.2"}]\nnativeSidecar: true',
});

function pod(annotations?: Record<string, string>, spec: JsonObject = {}): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-', ...(annotations === undefined ? {} : { annotations }) },
    spec: { containers: [{ name: 'web', image: 'nginx' }], ...spec },
  };
}

function decide(overrides: Partial<DecisionInput> = {}) {
  return decideInjection({
    operation: 'CREATE',
    kind: { group: '', kind: 'Pod' },
    namespace: 'shop',
    namespaceLabels: { 'envoy-injector.io/inject': 'enabled' },
    pod: pod(),
    templates,
    options: { excludedNamespaces: ['legacy'], injectorNamespace: 'envoy-injector' },
    ...overrides,
  });
}

describe('a copied envoy-injector.io/status', () => {
  it('is said in a warning that names the cause and the fix', () => {
    const decision = decide({ pod: pod({ 'envoy-injector.io/status': '{"template":"config","hash":"sha256:0","containers":["envoy"],"initContainers":[]}' }) });
    assert.deepEqual(decision.warnings, [
      'envoy-injector.io/status: it names containers the Pod does not have ("envoy"): it was copied into the Pod (from a running Pod\'s YAML?); remove it from the Pod template, or its Pods never get the sidecar',
    ]);
  });

  it('a real one gives no warning', () => {
    const decision = decide({ pod: pod({ 'envoy-injector.io/status': '{"template":"config","hash":"sha256:0","containers":["envoy"],"initContainers":[]}' }, { containers: [{ name: 'envoy' }] }) });
    assert.deepEqual(decision.warnings, []);
  });
});

describe('the injection decision (docs/design.md §4), branch by branch', () => {
  const cases: {
    name: string;
    input: Partial<DecisionInput>;
    inject: boolean;
    reason: Reason;
    rule: Rule;
    message: string;
  }[] = [
    {
      name: 'UPDATE is not injected',
      input: { operation: 'UPDATE' },
      inject: false, reason: Reason.notPodCreate, rule: Rule.kind,
      message: 'UPDATE of Pod: only Pod CREATE requests are injected',
    },
    {
      name: 'a Deployment is not a Pod',
      input: { kind: { group: 'apps', kind: 'Deployment' } },
      inject: false, reason: Reason.notPodCreate, rule: Rule.kind,
      message: 'CREATE of Deployment: only Pod CREATE requests are injected',
    },
    {
      name: 'a Pod subresource is not a Pod CREATE',
      input: { subResource: 'ephemeralcontainers' },
      inject: false, reason: Reason.notPodCreate, rule: Rule.kind,
      message: 'CREATE of Pod/ephemeralcontainers: only Pod CREATE requests are injected',
    },
    {
      name: 'kube-system is always excluded, even when labeled enabled and annotated true',
      input: { namespace: 'kube-system', pod: pod({ 'envoy-injector.io/inject': 'true' }) },
      inject: false, reason: Reason.excludedNamespace, rule: Rule.excludedNamespace,
      message: 'namespace "kube-system" is excluded from injection',
    },
    {
      name: 'kube-node-lease is always excluded',
      input: { namespace: 'kube-node-lease' },
      inject: false, reason: Reason.excludedNamespace, rule: Rule.excludedNamespace,
      message: 'namespace "kube-node-lease" is excluded from injection',
    },
    {
      name: "the injector's own namespace is excluded",
      input: { namespace: 'envoy-injector' },
      inject: false, reason: Reason.excludedNamespace, rule: Rule.excludedNamespace,
      message: 'namespace "envoy-injector" is excluded from injection',
    },
    {
      name: 'a configured namespace is excluded',
      input: { namespace: 'legacy' },
      inject: false, reason: Reason.excludedNamespace, rule: Rule.excludedNamespace,
      message: 'namespace "legacy" is excluded from injection',
    },
    {
      name: 'namespace label disabled beats the Pod annotation true',
      input: { namespaceLabels: { 'envoy-injector.io/inject': 'disabled' }, pod: pod({ 'envoy-injector.io/inject': 'true' }) },
      inject: false, reason: Reason.namespaceDisabled, rule: Rule.namespaceDisabled,
      message: 'namespace "shop" is labeled envoy-injector.io/inject=disabled',
    },
    {
      name: 'Pod annotation false beats the namespace label enabled',
      input: { pod: pod({ 'envoy-injector.io/inject': 'false' }) },
      inject: false, reason: Reason.podAnnotationFalse, rule: Rule.podAnnotation,
      message: 'the Pod is annotated envoy-injector.io/inject: "false"',
    },
    {
      name: 'Pod annotation true injects in an unlabeled namespace',
      input: { namespaceLabels: {}, pod: pod({ 'envoy-injector.io/inject': 'true' }) },
      inject: true, reason: Reason.podAnnotationTrue, rule: Rule.podAnnotation,
      message: 'the Pod is annotated envoy-injector.io/inject: "true"',
    },
    {
      name: "the seed's annotation initializer.kubernetes.io/envoy: true injects",
      input: { namespaceLabels: undefined, pod: pod({ 'initializer.kubernetes.io/envoy': 'true' }) },
      inject: true, reason: Reason.legacyAnnotation, rule: Rule.podAnnotation,
      message: 'the Pod is annotated initializer.kubernetes.io/envoy: "true"',
    },
    {
      name: 'the namespace label enabled injects an unannotated Pod',
      input: {},
      inject: true, reason: Reason.namespaceEnabled, rule: Rule.namespaceEnabled,
      message: 'namespace "shop" is labeled envoy-injector.io/inject=enabled',
    },
    {
      name: 'no label and no annotation: not injected',
      input: { namespaceLabels: { team: 'a' } },
      inject: false, reason: Reason.namespaceNotEnabled, rule: Rule.namespaceEnabled,
      message: 'namespace "shop" is not labeled envoy-injector.io/inject=enabled and the Pod is not annotated envoy-injector.io/inject: "true"',
    },
    {
      name: 'unknown namespace labels count as not enabled',
      input: { namespaceLabels: undefined },
      inject: false, reason: Reason.namespaceNotEnabled, rule: Rule.namespaceEnabled,
      message: 'namespace "shop" is not labeled envoy-injector.io/inject=enabled and the Pod is not annotated envoy-injector.io/inject: "true"',
    },
    {
      name: 'hostNetwork Pods in an enabled namespace are skipped',
      input: { pod: pod(undefined, { hostNetwork: true }) },
      inject: false, reason: Reason.hostNetwork, rule: Rule.hostNetwork,
      message: 'the Pod uses hostNetwork; annotate it envoy-injector.io/inject: "true" to inject it anyway',
    },
    {
      name: 'hostNetwork Pods annotated true are injected',
      input: { pod: pod({ 'envoy-injector.io/inject': 'true' }, { hostNetwork: true }) },
      inject: true, reason: Reason.podAnnotationTrue, rule: Rule.podAnnotation,
      message: 'the Pod is annotated envoy-injector.io/inject: "true"',
    },
    {
      name: 'a Windows Pod (spec.os.name) is never injected, even when annotated true',
      input: { pod: pod({ 'envoy-injector.io/inject': 'true' }, { os: { name: 'windows' } }) },
      inject: false, reason: Reason.windowsPod, rule: Rule.windows,
      message: 'the Pod runs on Windows (spec.os.name: windows): a Linux proxy cannot run there',
    },
    {
      name: 'a Pod whose nodeSelector picks Windows nodes is never injected',
      input: { pod: pod(undefined, { nodeSelector: { 'kubernetes.io/os': 'windows', zone: 'a' } }) },
      inject: false, reason: Reason.windowsPod, rule: Rule.windows,
      message: 'the Pod runs on Windows (its nodeSelector kubernetes.io/os: windows): a Linux proxy cannot run there',
    },
    {
      name: 'a Pod whose required node affinity matches only Windows nodes is never injected',
      input: {
        pod: pod(undefined, {
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [
                  { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['windows'] }] },
                  { matchExpressions: [{ key: 'zone', operator: 'In', values: ['a'] }, { key: 'kubernetes.io/os', operator: 'In', values: ['windows'] }] },
                ],
              },
            },
          },
        }),
      },
      inject: false, reason: Reason.windowsPod, rule: Rule.windows,
      message: 'the Pod runs on Windows (its required node affinity matches only kubernetes.io/os: windows): a Linux proxy cannot run there',
    },
    {
      name: 'a Pod whose required node affinity also matches Linux nodes is injected',
      input: {
        pod: pod(undefined, {
          affinity: {
            nodeAffinity: {
              requiredDuringSchedulingIgnoredDuringExecution: {
                nodeSelectorTerms: [
                  { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['windows'] }] },
                  { matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values: ['linux'] }] },
                ],
              },
            },
          },
        }),
      },
      inject: true, reason: Reason.namespaceEnabled, rule: Rule.namespaceEnabled,
      message: 'namespace "shop" is labeled envoy-injector.io/inject=enabled',
    },
    {
      name: 'a Linux Pod (spec.os.name: linux) is injected',
      input: { pod: pod(undefined, { os: { name: 'linux' }, nodeSelector: { 'kubernetes.io/os': 'linux' } }) },
      inject: true, reason: Reason.namespaceEnabled, rule: Rule.namespaceEnabled,
      message: 'namespace "shop" is labeled envoy-injector.io/inject=enabled',
    },
    {
      name: 'a Windows Pod that did not ask is skipped for that, not for Windows',
      input: { namespaceLabels: {}, pod: pod(undefined, { os: { name: 'windows' } }) },
      inject: false, reason: Reason.namespaceNotEnabled, rule: Rule.namespaceEnabled,
      message: 'namespace "shop" is not labeled envoy-injector.io/inject=enabled and the Pod is not annotated envoy-injector.io/inject: "true"',
    },
    {
      name: 'an already injected Pod is left as it is',
      input: { pod: pod({ 'envoy-injector.io/inject': 'true', 'envoy-injector.io/status': '{}' }) },
      inject: false, reason: Reason.alreadyInjected, rule: Rule.alreadyInjected,
      message: 'the Pod already carries envoy-injector.io/status',
    },
    {
      name: 'a status naming containers the Pod has: injected already (a reinvocation, a retry)',
      input: { pod: pod({ 'envoy-injector.io/status': '{"template":"config","hash":"sha256:0","containers":["envoy"],"initContainers":[]}' }, { containers: [{ name: 'web' }, { name: 'envoy' }] }) },
      inject: false, reason: Reason.alreadyInjected, rule: Rule.alreadyInjected,
      message: 'the Pod already carries envoy-injector.io/status',
    },
    {
      name: 'a status naming containers the Pod lacks was copied (from a running Pod\'s YAML)',
      input: { pod: pod({ 'envoy-injector.io/status': '{"template":"config","hash":"sha256:0","containers":[],"initContainers":["envoy"]}' }) },
      inject: false, reason: Reason.statusCopied, rule: Rule.alreadyInjected,
      message: 'the Pod carries a copied envoy-injector.io/status (it names containers the Pod does not have ("envoy"))',
    },
    {
      name: 'a status that is not the injector\'s JSON was not written by it',
      input: { pod: pod({ 'envoy-injector.io/status': 'injected' }) },
      inject: false, reason: Reason.statusCopied, rule: Rule.alreadyInjected,
      message: 'the Pod carries a copied envoy-injector.io/status (not the JSON the injector writes)',
    },
    {
      name: 'an unknown template name skips the Pod',
      input: { pod: pod({ 'envoy-injector.io/template': 'nope' }) },
      inject: false, reason: Reason.unknownTemplate, rule: Rule.template,
      message: 'no template named "nope"',
    },
    {
      name: 'offline: asking means injecting, whatever the namespace',
      input: { namespace: 'kube-system', namespaceLabels: undefined, options: { offline: true } },
      inject: true, reason: Reason.requestedOffline, rule: Rule.podAnnotation,
      message: 'injection was asked for (offline inject)',
    },
    {
      name: 'offline: annotation false still opts out',
      input: { options: { offline: true }, pod: pod({ 'envoy-injector.io/inject': 'false' }) },
      inject: false, reason: Reason.podAnnotationFalse, rule: Rule.podAnnotation,
      message: 'the Pod is annotated envoy-injector.io/inject: "false"',
    },
    {
      name: 'offline: hostNetwork still needs the annotation',
      input: { options: { offline: true }, pod: pod(undefined, { hostNetwork: true }) },
      inject: false, reason: Reason.hostNetwork, rule: Rule.hostNetwork,
      message: 'the Pod uses hostNetwork; annotate it envoy-injector.io/inject: "true" to inject it anyway',
    },
  ];

  for (const { name, input, inject, reason, rule, message } of cases) {
    it(name, () => {
      const decision = decide(input);
      assert.equal(decision.inject, inject);
      assert.equal(decision.reason, reason);
      assert.equal(decision.rule, rule);
      assert.equal(decision.message, message);
      const last = decision.trace.at(-1);
      assert.ok(last !== undefined);
      if (!inject) assert.deepEqual(last, { rule, outcome: 'skip', detail: message }, 'a skip ends the trace at the deciding rule');
      else assert.equal(last.rule, Rule.proxyName, "an injection ends the trace at the proxy's name, after the template choice");
    });
  }

  it('warns about an unknown template and lists the known ones', () => {
    const decision = decide({ pod: pod({ 'envoy-injector.io/template': 'nope' }) });
    assert.deepEqual(decision.warnings, [
      'envoy-injector.io/template: no template named "nope" (known: "config", "debug", "native"); the Pod was not injected',
    ]);
  });

  it('picks the template named by the annotation', () => {
    const decision = decide({ pod: pod({ 'envoy-injector.io/template': 'debug' }) });
    assert.ok(decision.inject);
    assert.equal(decision.template.name, 'debug');
  });

  it('ignores an inject annotation that is not "true" or "false", with a warning', () => {
    const decision = decide({ namespaceLabels: {}, pod: pod({ 'envoy-injector.io/inject': 'yes' }) });
    assert.equal(decision.inject, false);
    assert.equal(decision.reason, Reason.namespaceNotEnabled);
    assert.deepEqual(decision.warnings, ['envoy-injector.io/inject: "yes" is not "true" or "false"; ignored']);
  });

  it('ignores a namespace label value other than enabled or disabled', () => {
    assert.equal(decide({ namespaceLabels: { 'envoy-injector.io/inject': 'on' } }).reason, Reason.namespaceNotEnabled);
  });

  it('resolves native sidecars: Pod annotation, then template option, then the server setting', () => {
    const nativeOf = (input: Partial<DecisionInput>): boolean => {
      const decision = decide(input);
      assert.ok(decision.inject);
      return decision.nativeSidecar;
    };
    assert.equal(nativeOf({}), false);
    assert.equal(nativeOf({ options: { nativeSidecar: true } }), true);
    assert.equal(nativeOf({ pod: pod({ 'envoy-injector.io/template': 'native' }) }), true);
    assert.equal(nativeOf({ pod: pod({ 'envoy-injector.io/template': 'native', 'envoy-injector.io/native-sidecar': 'false' }) }), false);
    assert.equal(nativeOf({ pod: pod({ 'envoy-injector.io/native-sidecar': 'true' }) }), true);
  });

  it('never reads inherited properties: __proto__ and constructor keys are plain data', () => {
    const hostile = JSON.parse(
      '{"metadata":{"annotations":{"__proto__":{"envoy-injector.io/inject":"true"},"constructor":"x"}},"spec":{"containers":[]}}',
    ) as JsonObject;
    const decision = decide({ namespaceLabels: {}, pod: hostile });
    assert.equal(decision.reason, Reason.namespaceNotEnabled);
  });

  it('traces every rule it looked at, in order', () => {
    const decision = decide({});
    assert.deepEqual(
      decision.trace.map((step) => `${step.rule}:${step.outcome}`),
      [
        'kind:continue',
        'excluded-namespace:continue',
        'namespace-disabled:continue',
        'pod-annotation:continue',
        'namespace-enabled:inject',
        'host-network:continue',
        'windows:continue',
        'already-injected:continue',
        'other-mesh:continue',
        'template:continue',
        'proxy-name:continue',
      ],
    );
  });
});

/** Other meshes' injected Pods and the Pods that only look alike (test/fixtures/other-mesh-pods.yaml): each says what it expects. */
function otherMeshPods(): { name: string; expect: string; pod: JsonObject }[] {
  return parseYamlDocuments(repoFile('test/fixtures/other-mesh-pods.yaml')).filter(isJsonObject).map((document) => {
    const metadata = document['metadata'] as JsonObject;
    const annotations = metadata['annotations'] as Record<string, string>;
    return { name: String(metadata['name']), expect: String(annotations['envoy-injector.example/expect']), pod: document };
  });
}

describe('a Pod another mesh injected (rule 7a, other-mesh)', () => {
  for (const { name, expect, pod: meshPod } of otherMeshPods().filter((entry) => !['inject', 'proxy_name_taken'].includes(entry.expect))) {
    it(`${name}: left uninjected as ${expect}'s, whoever asked, with a warning naming what was found`, () => {
      for (const asked of [undefined, 'true']) {
        const annotations = { ...(meshPod['metadata'] as { annotations: Record<string, string> }).annotations, ...(asked === undefined ? {} : { 'envoy-injector.io/inject': asked }) };
        const decision = decide({ pod: { ...meshPod, metadata: { ...(meshPod['metadata'] as JsonObject), annotations } } });
        assert.equal(decision.inject, false);
        assert.equal(decision.reason, Reason.otherMeshInjected);
        assert.equal(decision.rule, Rule.otherMesh);
        assert.match(decision.message, new RegExp(`^the Pod was already injected by ${expect} \\(`));
        assert.equal(decision.warnings.length, 1);
        assert.match(decision.warnings[0] ?? '', new RegExp(`^the Pod was already injected by ${expect} \\(.+\\): it was not injected, as two proxies would fight over its traffic;`));
      }
    });
  }

  for (const { name, pod: plainPod } of otherMeshPods().filter((entry) => entry.expect === 'inject')) {
    it(`${name}: another mesh's opt-in or opt-out marks nothing injected: injected`, () => {
      const decision = decide({ pod: plainPod });
      assert.equal(decision.inject, true, decision.message);
      assert.deepEqual(decision.warnings, []);
    });
  }

  it('names every mark found: status annotation, label, containers and init containers', () => {
    const linkerd = otherMeshPods().find((entry) => entry.name === 'linkerd-classic');
    assert.ok(linkerd !== undefined);
    const decision = decide({ pod: linkerd.pod });
    assert.equal(
      decision.message,
      'the Pod was already injected by Linkerd (annotation linkerd.io/proxy-version, label linkerd.io/control-plane-ns, container linkerd-proxy, init container linkerd-init)',
    );
  });

  it('our own status wins: a Pod we injected stays already_injected (a reinvocation), whatever else it holds', () => {
    const status = '{"template":"config","hash":"sha256:0","containers":["envoy"],"initContainers":[]}';
    const decision = decide({ pod: pod({ 'envoy-injector.io/status': status, 'sidecar.istio.io/status': '{}' }, { containers: [{ name: 'web' }, { name: 'envoy' }, { name: 'istio-proxy' }] }) });
    assert.equal(decision.reason, Reason.alreadyInjected);
  });

  it('a Pod that did not ask is not looked at: namespace_not_enabled, no warning', () => {
    const decision = decide({ namespaceLabels: {}, pod: pod({ 'sidecar.istio.io/status': '{}' }) });
    assert.equal(decision.reason, Reason.namespaceNotEnabled);
    assert.deepEqual(decision.warnings, []);
  });
});

describe("a Pod whose own container has the template proxy's name (rule 8, proxy-name)", () => {
  for (const { name, pod: ownPod } of otherMeshPods().filter((entry) => entry.expect === 'proxy_name_taken')) {
    it(`${name}: not injected, and said plainly (no status, no label, nothing added)`, () => {
      const admission = admitPod({
        operation: 'CREATE',
        kind: { group: '', kind: 'Pod' },
        namespace: 'shop',
        namespaceLabels: { 'envoy-injector.io/inject': 'enabled' },
        pod: ownPod,
        templates,
        options: {},
      });
      assert.equal(admission.decision.inject, false);
      assert.equal(admission.decision.reason, Reason.proxyNameTaken);
      assert.equal(admission.decision.rule, Rule.proxyName);
      assert.equal(admission.injection, undefined);
      assert.equal(
        admission.decision.message,
        'the Pod already has a container named "envoy" that the injector did not add, the name of template "config"\'s proxy',
      );
      assert.deepEqual(admission.warnings, [
        'the Pod already has a container named "envoy" that the injector did not add, the name of template "config"\'s proxy: it was not injected (a second envoy cannot be added, and the Pod\'s own is not ours); rename that container, name another template in envoy-injector.io/template, or annotate the Pod envoy-injector.io/inject: "false" to say it is meant',
      ]);
    });
  }

  it('only the proxy counts: a Pod whose container has the name of another template container is injected, keeping its own', () => {
    const two = parseTemplateData({ config: 'containers: [{name: envoy, image: "e:1"}, {name: config-reloader, image: "r:1"}]' });
    const decision = decide({ templates: two, pod: pod(undefined, { containers: [{ name: 'web' }, { name: 'config-reloader' }] }) });
    assert.equal(decision.inject, true);
  });

  it("the template the Pod names decides the proxy's name", () => {
    const named = parseTemplateData({ config: 'containers: [{name: envoy, image: "e:1"}]', sidecar: 'containers: [{name: mesh-proxy, image: "e:1"}]' });
    const own = pod({ 'envoy-injector.io/template': 'sidecar' }, { containers: [{ name: 'web' }, { name: 'envoy' }] });
    assert.equal(decide({ templates: named, pod: own }).inject, true);
    assert.equal(decide({ templates: named, pod: pod(undefined, { containers: [{ name: 'web' }, { name: 'envoy' }] }) }).reason, Reason.proxyNameTaken);
  });
});
