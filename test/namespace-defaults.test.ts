import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import {
  admitPod,
  applyPodPatch,
  parseLabelSelectors,
  parseTemplateData,
  Reason,
  Rule,
  selectorMatches,
  type AdmitOptions,
  type JsonObject,
  type LabelSelector,
} from '../src/injection/index.js';

const templates = parseTemplateData({
  config: `containers:
  - name: envoy
    image: envoyproxy/envoy:v1.31.2
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: "1", memory: 512Mi}
`,
  canary: `containers:
  - name: envoy
    image: envoyproxy/envoy:v1.32.0
    resources:
      requests: {cpu: 100m, memory: 64Mi}
      limits: {cpu: "1", memory: 512Mi}
`,
});

interface Case {
  readonly pod?: Record<string, string>;
  readonly podLabels?: Record<string, string>;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
  readonly options?: AdmitOptions;
}

function admit({ pod = {}, podLabels, labels = { 'envoy-injector.io/inject': 'enabled' }, annotations, options = {} }: Case) {
  const received: JsonObject = {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-', annotations: pod, ...(podLabels === undefined ? {} : { labels: podLabels }) },
    spec: { containers: [{ name: 'web', image: 'nginx' }] },
  };
  const admission = admitPod({
    operation: 'CREATE',
    kind: { group: '', kind: 'Pod' },
    namespace: 'shop',
    namespaceLabels: labels,
    namespaceAnnotations: annotations,
    pod: received,
    templates,
    options,
  });
  const injected = admission.injection === undefined ? undefined : applyPodPatch(received, admission.injection.patch);
  const containers = (injected?.['spec'] as { containers: JsonObject[] } | undefined)?.containers ?? [];
  return { admission, proxy: containers.find((container) => container['name'] === 'envoy') };
}

const selectors = (json: unknown): LabelSelector[] => {
  const { selectors: parsed, problems } = parseLabelSelectors(json);
  assert.deepEqual(problems, []);
  return parsed;
};

describe('the template by namespace: Pod annotation > namespace label > default', () => {
  const table: { name: string; input: Case; template: string | undefined; source?: string; reason?: string }[] = [
    { name: 'no label: the default', input: {}, template: 'config', source: 'default' },
    { name: 'the namespace label picks it', input: { labels: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'canary' } }, template: 'canary', source: 'namespace' },
    {
      name: "the Pod's annotation wins over the namespace's label",
      input: { pod: { 'envoy-injector.io/template': 'config' }, labels: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'canary' } },
      template: 'config',
      source: 'pod',
    },
    {
      name: 'an unknown namespace template skips the Pod, never refuses it',
      input: { labels: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'nope' } },
      template: undefined,
      reason: Reason.unknownNamespaceTemplate,
    },
    {
      name: "a Pod naming a known template is injected though its namespace's is unknown",
      input: { pod: { 'envoy-injector.io/template': 'canary' }, labels: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'nope' } },
      template: 'canary',
      source: 'pod',
    },
    {
      name: "an unknown Pod template is the Pod's unknown_template, whatever the namespace picks",
      input: { pod: { 'envoy-injector.io/template': 'nope' }, labels: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'canary' } },
      template: undefined,
      reason: Reason.unknownTemplate,
    },
    {
      name: 'a Pod opted in by annotation in an unlabeled namespace takes the namespace template too',
      input: { pod: { 'envoy-injector.io/inject': 'true' }, labels: { 'envoy-injector.io/template': 'canary' } },
      template: 'canary',
      source: 'namespace',
    },
  ];
  for (const { name, input, template, source, reason } of table) {
    it(name, () => {
      const { decision } = admit(input).admission;
      assert.equal(decision.inject ? decision.template.name : undefined, template);
      if (decision.inject) assert.equal(decision.templateSource, source);
      else assert.equal(decision.reason, reason);
    });
  }

  it('the unknown namespace template is said in a warning naming it, the namespace and the known ones', () => {
    const { admission } = admit({ labels: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'nope' } });
    assert.equal(admission.decision.rule, Rule.template);
    assert.deepEqual(admission.warnings, [
      'envoy-injector.io/template: namespace "shop" picks the template "nope", and there is none of that name (known: "config", "canary"); the Pod was not injected',
    ]);
  });
});

describe('proxy defaults by namespace: Pod annotation > namespace annotation > template', () => {
  const resources = (proxy: JsonObject | undefined) => proxy?.['resources'];
  it('a namespace annotation is the default of its Pods', () => {
    const { admission, proxy } = admit({ annotations: { 'envoy-injector.io/proxy-cpu': '200m', 'envoy-injector.io/proxy-memory-limit': '1Gi' } });
    assert.deepEqual(resources(proxy), { requests: { cpu: '200m', memory: '64Mi' }, limits: { cpu: '1', memory: '1Gi' } });
    assert.deepEqual(admission.overrides.map((o) => [o.annotation, o.value, o.source]), [
      ['envoy-injector.io/proxy-cpu', '200m', 'namespace'],
      ['envoy-injector.io/proxy-memory-limit', '1Gi', 'namespace'],
    ]);
    assert.deepEqual(admission.warnings, []);
  });

  it("a Pod's own annotation wins, field by field", () => {
    const { admission, proxy } = admit({
      pod: { 'envoy-injector.io/proxy-cpu': '300m' },
      annotations: { 'envoy-injector.io/proxy-cpu': '200m', 'envoy-injector.io/proxy-memory': '128Mi' },
    });
    assert.deepEqual(resources(proxy), { requests: { cpu: '300m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } });
    assert.deepEqual(admission.overrides.map((o) => [o.annotation, o.source]), [
      ['envoy-injector.io/proxy-cpu', 'pod'],
      ['envoy-injector.io/proxy-memory', 'namespace'],
    ]);
  });

  it('each of the four resources, Pod over namespace over template', () => {
    for (const [name, kind, resource] of [['proxy-cpu', 'requests', 'cpu'], ['proxy-memory', 'requests', 'memory'], ['proxy-cpu-limit', 'limits', 'cpu'], ['proxy-memory-limit', 'limits', 'memory']] as const) {
      const values = kind === 'requests' ? ['150m', '250m'] : ['3', '4'];
      const pick = (input: Case) => ((resources(admit(input).proxy) as Record<string, Record<string, string>>)[kind] ?? {})[resource];
      const template = pick({});
      const namespaceValue = resource === 'memory' ? (kind === 'requests' ? '100Mi' : '900Mi') : values[0];
      const podValue = resource === 'memory' ? (kind === 'requests' ? '200Mi' : '800Mi') : values[1];
      assert.equal(pick({ annotations: { [`envoy-injector.io/${name}`]: namespaceValue ?? '' } }), namespaceValue, name);
      assert.equal(pick({ pod: { [`envoy-injector.io/${name}`]: podValue ?? '' }, annotations: { [`envoy-injector.io/${name}`]: namespaceValue ?? '' } }), podValue, name);
      assert.ok(template !== undefined);
    }
  });

  it('an invalid namespace value is ignored with a warning naming the namespace, and the Pod is injected', () => {
    const { admission, proxy } = admit({ annotations: { 'envoy-injector.io/proxy-cpu': 'lots', 'envoy-injector.io/proxy-memory': '128Mi' } });
    assert.equal(admission.decision.inject, true);
    assert.deepEqual(resources(proxy), { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } });
    assert.equal(admission.warnings.length, 1);
    assert.match(admission.warnings[0] ?? '', /^envoy-injector\.io\/proxy-cpu \(namespace "shop"\): "lots" is not a quantity.*; the Pods' own or the template's value applies$/);
  });

  it("a namespace request above the template's limit is ignored for that resource", () => {
    const { admission, proxy } = admit({ annotations: { 'envoy-injector.io/proxy-cpu': '2', 'envoy-injector.io/proxy-memory': '128Mi' } });
    assert.deepEqual(resources(proxy), { requests: { cpu: '100m', memory: '128Mi' }, limits: { cpu: '1', memory: '512Mi' } });
    assert.deepEqual(admission.warnings, ['envoy-injector.io/proxy-cpu (namespace "shop"): the cpu request "2" is above the limit "1"; the template\'s cpu values were kept']);
  });

  it("a Pod's request above its namespace's limit drops the Pod's value and keeps the namespace's", () => {
    const { admission, proxy } = admit({ pod: { 'envoy-injector.io/proxy-cpu': '3' }, annotations: { 'envoy-injector.io/proxy-cpu-limit': '2' } });
    assert.deepEqual(resources(proxy), { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '2', memory: '512Mi' } });
    assert.deepEqual(admission.warnings, ['envoy-injector.io/proxy-cpu: the cpu request "3" is above the limit "2"; namespace "shop"\'s cpu values were kept']);
  });

  it("an invalid Pod value falls back to the namespace's, and says so", () => {
    const { admission, proxy } = admit({ pod: { 'envoy-injector.io/proxy-memory': 'big' }, annotations: { 'envoy-injector.io/proxy-memory': '128Mi' } });
    assert.equal((resources(proxy) as { requests: Record<string, string> }).requests['memory'], '128Mi');
    assert.match(admission.warnings[0] ?? '', /^envoy-injector\.io\/proxy-memory: "big" is not a quantity.*; namespace "shop"'s value was kept$/);
  });

  it('proxy-image on a namespace applies only where allowedOverrides allows it', () => {
    const image = { 'envoy-injector.io/proxy-image': 'registry.example.com/envoy:v1.33.0' };
    const denied = admit({ annotations: image });
    assert.equal(denied.proxy?.['image'], 'envoyproxy/envoy:v1.31.2');
    assert.match(denied.admission.warnings[0] ?? '', /^envoy-injector\.io\/proxy-image \(namespace "shop"\): overriding the proxy image is not allowed/);
    const allowed = admit({ annotations: image, options: { allowedOverrides: ['proxy-image'] } });
    assert.equal(allowed.proxy?.['image'], 'registry.example.com/envoy:v1.33.0');
    assert.deepEqual(allowed.admission.warnings, []);
  });

  it('namespace defaults and template by namespace together', () => {
    const { admission, proxy } = admit({ labels: { 'envoy-injector.io/inject': 'enabled', 'envoy-injector.io/template': 'canary' }, annotations: { 'envoy-injector.io/proxy-cpu': '200m' } });
    assert.equal(proxy?.['image'], 'envoyproxy/envoy:v1.32.0');
    assert.equal((resources(proxy) as { requests: Record<string, string> }).requests['cpu'], '200m');
    assert.equal(admission.decision.inject && admission.decision.templateSource, 'namespace');
  });
});

describe('central selectors: Pod annotation > never > always > namespace label', () => {
  const options: AdmitOptions = {
    neverInjectSelectors: selectors([{ matchLabels: { plain: 'yes' } }, { matchExpressions: [{ key: 'tier', operator: 'In', values: ['db', 'cache'] }] }]),
    alwaysInjectSelectors: selectors([{ matchExpressions: [{ key: 'mesh', operator: 'Exists' }] }]),
  };
  const unlabeled = {};
  const table: { name: string; input: Case; inject: boolean; reason: string; rule: string }[] = [
    { name: 'never: skipped in an enabled namespace', input: { podLabels: { plain: 'yes' }, options }, inject: false, reason: Reason.neverInjectSelector, rule: Rule.podSelector },
    { name: 'never by matchExpressions In', input: { podLabels: { tier: 'cache' }, options }, inject: false, reason: Reason.neverInjectSelector, rule: Rule.podSelector },
    { name: "the Pod's inject: \"true\" beats never", input: { pod: { 'envoy-injector.io/inject': 'true' }, podLabels: { plain: 'yes' }, options }, inject: true, reason: Reason.podAnnotationTrue, rule: Rule.podAnnotation },
    { name: 'always: injected in a namespace not labeled enabled', input: { podLabels: { mesh: '' }, labels: unlabeled, options }, inject: true, reason: Reason.alwaysInjectSelector, rule: Rule.podSelector },
    { name: "the Pod's inject: \"false\" beats always", input: { pod: { 'envoy-injector.io/inject': 'false' }, podLabels: { mesh: 'on' }, options }, inject: false, reason: Reason.podAnnotationFalse, rule: Rule.podAnnotation },
    { name: 'never beats always', input: { podLabels: { mesh: 'on', plain: 'yes' }, options }, inject: false, reason: Reason.neverInjectSelector, rule: Rule.podSelector },
    { name: "the namespace's disabled label beats always", input: { podLabels: { mesh: 'on' }, labels: { 'envoy-injector.io/inject': 'disabled' }, options }, inject: false, reason: Reason.namespaceDisabled, rule: Rule.namespaceDisabled },
    { name: 'no selector matches: the namespace label decides', input: { podLabels: { tier: 'web' }, options }, inject: true, reason: Reason.namespaceEnabled, rule: Rule.namespaceEnabled },
    { name: 'no selector matches, unlabeled namespace: skipped', input: { podLabels: { tier: 'web' }, labels: unlabeled, options }, inject: false, reason: Reason.namespaceNotEnabled, rule: Rule.namespaceEnabled },
  ];
  for (const { name, input, inject, reason, rule } of table) {
    it(name, () => {
      const { decision } = admit(input).admission;
      assert.deepEqual([decision.inject, decision.reason, decision.rule], [inject, reason, rule]);
    });
  }

  it('the trace names the selector that decided', () => {
    const { decision } = admit({ podLabels: { tier: 'db' }, options }).admission;
    assert.deepEqual(decision.trace.at(-1), {
      rule: Rule.podSelector,
      outcome: 'skip',
      detail: 'the Pod\'s labels match the never-inject selector "tier in (db,cache)"; annotate it envoy-injector.io/inject: "true" to inject it anyway',
    });
  });

  it('a hostNetwork Pod picked by always is still skipped (only its own annotation lets it in)', () => {
    const received: JsonObject = { metadata: { labels: { mesh: 'on' } }, spec: { hostNetwork: true, containers: [{ name: 'web' }] } };
    const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: received, templates, options });
    assert.equal(admission.decision.reason, Reason.hostNetwork);
  });
});

describe('label selectors', () => {
  it('follow the standard semantics of In, NotIn, Exists, DoesNotExist and matchLabels', () => {
    const [selector] = selectors([
      {
        matchLabels: { app: 'web' },
        matchExpressions: [
          { key: 'tier', operator: 'In', values: ['a', 'b'] },
          { key: 'env', operator: 'NotIn', values: ['prod'] },
          { key: 'mesh', operator: 'Exists' },
          { key: 'legacy', operator: 'DoesNotExist' },
        ],
      },
    ]);
    assert.ok(selector !== undefined);
    const base = { app: 'web', tier: 'a', mesh: '' };
    assert.equal(selectorMatches(selector, base), true);
    assert.equal(selectorMatches(selector, { ...base, env: 'dev' }), true);
    assert.equal(selectorMatches(selector, { ...base, env: 'prod' }), false);
    assert.equal(selectorMatches(selector, { ...base, tier: 'c' }), false);
    assert.equal(selectorMatches(selector, { app: 'web', mesh: '' }), false);
    assert.equal(selectorMatches(selector, { app: 'web', tier: 'a' }), false);
    assert.equal(selectorMatches(selector, { ...base, legacy: 'x' }), false);
    assert.equal(selectorMatches(selector, { ...base, app: 'api' }), false);
    assert.equal(selectorMatches(selector, undefined), false);
  });

  it('bad selectors are refused with every problem, by place', () => {
    assert.deepEqual(parseLabelSelectors({}).problems, ['must be a JSON list of label selectors ([{"matchLabels": {...}}, ...])']);
    assert.deepEqual(
      parseLabelSelectors([
        {},
        { matchLabels: { 'bad key!': 'x' } },
        { matchExpressions: [{ key: 'a', operator: 'Equals', values: ['x'] }] },
        { matchExpressions: [{ key: 'a', operator: 'In', values: [] }, { key: 'b', operator: 'Exists', values: ['x'] }] },
        { matchLabel: { a: 'b' } },
      ]).problems,
      [
        '[0]: an empty selector would match every Pod; give matchLabels or matchExpressions',
        '[1].matchLabels: "bad key!" is not a label key (at most 63 characters: letters, digits, "-", "_", ".", starting and ending with a letter or digit)',
        '[2].matchExpressions[0].operator: "Equals" is not one of In, NotIn, Exists, DoesNotExist',
        '[3].matchExpressions[0].values: In needs at least one value',
        '[3].matchExpressions[1].values: Exists takes no values',
        '[4].matchLabel: unknown field (a label selector has matchLabels and matchExpressions)',
      ],
    );
  });
});
