import { readFileSync } from 'node:fs';
import fc from 'fast-check';
import { join } from 'node:path';
import { findPodTemplate, isJsonObject, MAX_PADDED_INIT_CONTAINERS, parseYamlDocuments, type JsonObject } from '../../src/injection/index.js';
import { ROOT } from '../helpers/fixtures.js';
import { largePod } from '../helpers/large-pod.js';

/** The kinds of namespace a Pod is created in, once per path (webhook, policy). */
export const NamespaceKind = {
  /** Labeled envoy-injector.io/inject=enabled. */
  enabled: 'enabled',
  /** No label: only Pods that ask are injected. */
  plain: 'plain',
  /** Labeled envoy-injector.io/inject=disabled. */
  disabled: 'disabled',
  /** In the excluded namespaces setting. */
  excluded: 'excluded',
  /** Labeled enabled, and pod-security.kubernetes.io/enforce=baseline: injected, never captured. */
  baseline: 'baseline',
  /** Labeled enabled and envoy-injector.io/template=debug, with a proxy-cpu default. */
  canary: 'canary',
  /** Not labeled enabled, envoy-injector.io/template=native: the Pods that ask get it. */
  plainCanary: 'plain-canary',
  /** Labeled enabled and envoy-injector.io/template=nope: no such template. */
  unknownTemplate: 'unknown-template',
  /** Labeled enabled, every proxy default valid (the image too). */
  defaults: 'defaults',
  /** Labeled enabled, envoy-injector.io/template=limits-only, proxy defaults invalid or above the template's limits. */
  badDefaults: 'bad-defaults',
  /** Labeled enabled, and pod-security.kubernetes.io/enforce=restricted (the Pod features corpus). */
  restricted: 'restricted',
  /** Labeled disabled, and enforcing restricted: Pods as written (the Pod features corpus). */
  restrictedDisabled: 'restricted-disabled',
  /** Labeled enabled, annotated with an OpenShift uid range and supplemental groups (issue 53): the proxy's ids from them. */
  openshift: 'openshift',
  /** Labeled enabled, an OpenShift uid range of a size of 0 and no groups: the template's ids. */
  openshiftBad: 'openshift-bad',
  /** Labeled enabled, an OpenShift uid range in the dash notation, supplemental groups whose first block is malformed. */
  openshiftDash: 'openshift-dash',
} as const;
export type NamespaceKind = (typeof NamespaceKind)[keyof typeof NamespaceKind];

const enabled = { 'envoy-injector.io/inject': 'enabled' };
const defaultOf = (name: string): string => `envoy-injector.io/${name}`;

/** The labels and annotations of each kind of namespace (beyond the run's own label). */
export const NAMESPACE_METADATA: Readonly<Record<NamespaceKind, { readonly labels: Record<string, string>; readonly annotations?: Record<string, string> }>> = {
  enabled: { labels: enabled },
  plain: { labels: {} },
  disabled: { labels: { 'envoy-injector.io/inject': 'disabled' } },
  excluded: { labels: {} },
  baseline: { labels: { ...enabled, 'pod-security.kubernetes.io/enforce': 'baseline' } },
  canary: { labels: { ...enabled, 'envoy-injector.io/template': 'debug' }, annotations: { [defaultOf('proxy-cpu')]: '150m' } },
  'plain-canary': { labels: { 'envoy-injector.io/template': 'native' } },
  'unknown-template': { labels: { ...enabled, 'envoy-injector.io/template': 'nope' } },
  defaults: {
    labels: enabled,
    annotations: {
      [defaultOf('proxy-cpu')]: '250m',
      [defaultOf('proxy-memory')]: '96Mi',
      [defaultOf('proxy-cpu-limit')]: '2',
      [defaultOf('proxy-memory-limit')]: '512Mi',
      [defaultOf('proxy-image')]: 'registry.example/envoy:v1.33.0',
      'example.com/unrelated': 'kept out of the cache',
    },
  },
  restricted: { labels: { ...enabled, 'pod-security.kubernetes.io/enforce': 'restricted' } },
  'restricted-disabled': { labels: { 'envoy-injector.io/inject': 'disabled', 'pod-security.kubernetes.io/enforce': 'restricted' } },
  openshift: { labels: enabled, annotations: { 'openshift.io/sa.scc.uid-range': '1000620000/10000', 'openshift.io/sa.scc.supplemental-groups': '1000700000/5000,1000800000/10', 'openshift.io/sa.scc.mcs': 's0:c25,c10' } },
  'openshift-bad': { labels: enabled, annotations: { 'openshift.io/sa.scc.uid-range': '1000620000/0' } },
  'openshift-dash': { labels: enabled, annotations: { 'openshift.io/sa.scc.uid-range': '1000650000-1000650001', 'openshift.io/sa.scc.supplemental-groups': '/' } },
  'bad-defaults': {
    labels: { ...enabled, 'envoy-injector.io/template': 'limits-only' },
    annotations: { [defaultOf('proxy-cpu')]: '1', [defaultOf('proxy-memory')]: 'lots', [defaultOf('proxy-memory-limit')]: '64Mi', [defaultOf('proxy-image')]: 'bad image' },
  },
};

export interface ParityCase {
  readonly title: string;
  readonly namespace: NamespaceKind;
  readonly pod: JsonObject;
}

const INJECT = 'envoy-injector.io/inject';
const TEMPLATE = 'envoy-injector.io/template';
const NATIVE = 'envoy-injector.io/native-sidecar';
const STATUS = 'envoy-injector.io/status';
const LEGACY = 'initializer.kubernetes.io/envoy';
const override = (name: string): string => `envoy-injector.io/${name}`;

interface PodShape {
  readonly annotations?: Record<string, string>;
  readonly labels?: Record<string, string>;
  readonly spec?: JsonObject;
}

function pod({ annotations, labels, spec = {} }: PodShape): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { ...(annotations === undefined ? {} : { annotations }), ...(labels === undefined ? {} : { labels }) },
    spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0' }], ...spec },
  };
}

/** Every Pod and Pod template of the golden corpus whose annotation keys Kubernetes accepts. */
function goldenCorpus(): ParityCase[] {
  const files = ['examples/myapp-pod.yaml', ...['deployment', 'existing-envoy', 'pod-with-volumes', 'native-job', 'mixed-kinds', 'named-template', 'explain-pods'].map((name) => `test/golden/${name}.yaml`)];
  const cases: ParityCase[] = [];
  for (const file of files) {
    const documents = parseYamlDocuments(readFileSync(join(ROOT, file), 'utf8')).filter(isJsonObject);
    const objects = documents.flatMap((document) => (document['kind'] === 'List' && Array.isArray(document['items']) ? document['items'].filter(isJsonObject) : [document]));
    for (const object of objects) {
      const found = findPodTemplate(object);
      if (found === undefined) continue;
      const metadata = isJsonObject(found.pod['metadata']) ? found.pod['metadata'] : {};
      const { name: _name, namespace: _namespace, generateName: _generateName, ...rest } = metadata;
      cases.push({
        title: `golden ${file}: ${found.kind} ${found.name}`,
        namespace: NamespaceKind.enabled,
        pod: { apiVersion: 'v1', kind: 'Pod', metadata: rest, spec: isJsonObject(found.pod['spec']) ? found.pod['spec'] : {} },
      });
    }
  }
  return cases;
}

/** Each skip rule, each opt-in path, the merge's edges, native and classic, every override outcome. */
function handWritten(): ParityCase[] {
  const c = (title: string, namespace: NamespaceKind, shape: PodShape): ParityCase => ({ title, namespace, pod: pod(shape) });
  return [
    c('plain namespace, no annotation: skipped', 'plain', {}),
    c('plain namespace, inject "true"', 'plain', { annotations: { [INJECT]: 'true' } }),
    c('plain namespace, the seed\'s annotation', 'plain', { annotations: { [LEGACY]: 'true' } }),
    c('plain namespace, inject "yes" (ignored) and the seed\'s annotation', 'plain', { annotations: { [INJECT]: 'yes', [LEGACY]: 'true' } }),
    c('plain namespace, inject "false" beats the seed\'s annotation', 'plain', { annotations: { [INJECT]: 'false', [LEGACY]: 'true' } }),
    c('enabled namespace, no annotation', 'enabled', {}),
    c('enabled namespace, inject "false"', 'enabled', { annotations: { [INJECT]: 'false' } }),
    c('enabled namespace, inject "yes" is ignored', 'enabled', { annotations: { [INJECT]: 'yes' } }),
    c('disabled namespace beats inject "true"', 'disabled', { annotations: { [INJECT]: 'true' } }),
    c('excluded namespace beats inject "true"', 'excluded', { annotations: { [INJECT]: 'true' } }),
    c('hostNetwork in an enabled namespace: skipped', 'enabled', { spec: { hostNetwork: true } }),
    c('hostNetwork with inject "true"', 'plain', { annotations: { [INJECT]: 'true' }, spec: { hostNetwork: true } }),
    c('hostNetwork with the seed\'s annotation', 'enabled', { annotations: { [LEGACY]: 'true' }, spec: { hostNetwork: true } }),
    c('already injected: left as it is', 'enabled', { annotations: { [STATUS]: '{"template":"config"}' } }),
    c('named template "debug"', 'enabled', { annotations: { [TEMPLATE]: 'debug' } }),
    c('named template "native" (the template asks for native sidecars)', 'enabled', { annotations: { [TEMPLATE]: 'native' } }),
    c('unknown template: skipped', 'enabled', { annotations: { [TEMPLATE]: 'nope' } }),
    c('empty template name: skipped', 'enabled', { annotations: { [TEMPLATE]: '' } }),
    c('native-sidecar "true" with the default template', 'enabled', { annotations: { [NATIVE]: 'true' } }),
    c('native-sidecar "false" beats the native template', 'enabled', { annotations: { [TEMPLATE]: 'native', [NATIVE]: 'false' } }),
    c('native-sidecar "maybe" is ignored', 'enabled', { annotations: { [TEMPLATE]: 'native', [NATIVE]: 'maybe' } }),
    c('native, with init containers of its own: the sidecars go first', 'enabled', {
      annotations: { [NATIVE]: 'true' },
      spec: { initContainers: [{ name: 'migrate', image: 'registry.example/migrate:1' }, { name: 'seed', image: 'registry.example/seed:1' }] },
    }),
    c('classic, with init containers of its own: the template\'s init container goes last', 'enabled', {
      spec: { initContainers: [{ name: 'migrate', image: 'registry.example/migrate:1' }] },
    }),
    c('the Pod has its own envoy: not injected (proxy_name_taken), its overrides never reach it', 'enabled', {
      annotations: { [override('proxy-cpu')]: '300m' },
      spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0' }, { name: 'envoy', image: 'registry.example/my-envoy:2' }] },
    }),
    c('an init container named like a template container: kept across lists', 'enabled', {
      spec: { initContainers: [{ name: 'config-reloader', image: 'registry.example/reloader:9' }] },
    }),
    c('a container named like the template\'s init container', 'enabled', {
      spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0' }, { name: 'envoy-init', image: 'registry.example/init:9' }] },
    }),
    c('existing volume and pull secret of the same names: kept', 'enabled', {
      spec: { volumes: [{ name: 'envoy-conf', emptyDir: {} }, { name: 'data', emptyDir: {} }], imagePullSecrets: [{ name: 'registry' }, { name: 'other' }] },
    }),
    c('existing lists without the template\'s names: appended', 'enabled', {
      spec: { volumes: [{ name: 'data', emptyDir: {} }], imagePullSecrets: [{ name: 'other' }] },
    }),
    c('every template name already taken, the proxy\'s too: not injected (proxy_name_taken)', 'enabled', {
      spec: {
        containers: [{ name: 'envoy', image: 'a:1' }, { name: 'config-reloader', image: 'b:1' }],
        initContainers: [{ name: 'envoy-init', image: 'c:1' }],
        volumes: [{ name: 'envoy-conf', emptyDir: {} }, { name: 'envoy-cache', emptyDir: {} }],
        imagePullSecrets: [{ name: 'registry' }],
      },
    }),
    c('annotation keys and values with / and ~', 'enabled', {
      annotations: { 'example.com/path': 'a/b~c', 'team.example.com/owner': '~1/~0', 'a.b.c/d': '/' },
    }),
    c('valid overrides: cpu and memory requests', 'enabled', { annotations: { [override('proxy-cpu')]: '250m', [override('proxy-memory')]: '128Mi' } }),
    c('valid overrides: all four', 'enabled', {
      annotations: { [override('proxy-cpu')]: '0.5', [override('proxy-cpu-limit')]: '2', [override('proxy-memory')]: '100M', [override('proxy-memory-limit')]: '1Gi' },
    }),
    c('invalid override: not a quantity', 'enabled', { annotations: { [override('proxy-cpu')]: 'lots', [override('proxy-memory')]: '96Mi' } }),
    c('invalid override: negative', 'enabled', { annotations: { [override('proxy-memory')]: '-1Mi' } }),
    c('invalid override: "1n" is a Kubernetes quantity but not ours', 'enabled', { annotations: { [override('proxy-cpu')]: '1n' } }),
    c('override request above the template limit (a number): both kept', 'enabled', { annotations: { [override('proxy-cpu')]: '1.5' } }),
    c('override request equal to the limit', 'enabled', { annotations: { [override('proxy-cpu')]: '1000m' } }),
    c('override limit below the template request: kept', 'enabled', { annotations: { [override('proxy-memory-limit')]: '32Mi' } }),
    c('overrides where the template has no resources', 'enabled', {
      annotations: { [TEMPLATE]: 'native', [override('proxy-cpu')]: '200m', [override('proxy-memory-limit')]: '300Mi' },
    }),
    c('no valid override where the template has no resources', 'enabled', { annotations: { [TEMPLATE]: 'native', [override('proxy-cpu')]: 'x' } }),
    c('limits-only template: a request is added', 'enabled', { annotations: { [TEMPLATE]: 'limits-only', [override('proxy-cpu')]: '100m' } }),
    c('limits-only template: a request above the limit is dropped', 'enabled', { annotations: { [TEMPLATE]: 'limits-only', [override('proxy-cpu')]: '2' } }),
    c('pull secret names with quotes and backslashes: the status is the same JSON', 'enabled', { annotations: { [TEMPLATE]: 'quoted-names' } }),
    c('pull secret names with quotes and backslashes, one the Pod has', 'enabled', { annotations: { [TEMPLATE]: 'quoted-names' }, spec: { imagePullSecrets: [{ name: 'reg"istry' }] } }),
    c('an exponent past the bound (1e1001) on a template without resources: ignored', 'enabled', { annotations: { [TEMPLATE]: 'native', [override('proxy-cpu')]: '1e1001' } }),
    c('an exponent past the bound, negative (1e-1001): ignored', 'enabled', { annotations: { [override('proxy-memory')]: '1e-1001' } }),
    c('an exponent at the bound, with leading zeros (1e01000)', 'enabled', { annotations: { [TEMPLATE]: 'native', [override('proxy-cpu-limit')]: '1e01000' } }),
    c('a 2e100 request over a 1e100 limit: both kept', 'enabled', { annotations: { [override('proxy-cpu')]: '2e100', [override('proxy-cpu-limit')]: '1e100' } }),
    c('a 1e100 request under a 2e100 limit', 'enabled', { annotations: { [override('proxy-cpu')]: '1e100', [override('proxy-cpu-limit')]: '2e100' } }),
    c('20-digit memory values', 'enabled', { annotations: { [override('proxy-memory')]: '12345678901234567890', [override('proxy-memory-limit')]: '99999999999999999999' } }),
    c('proxy-image: a valid reference', 'enabled', { annotations: { [override('proxy-image')]: 'registry.example:5000/mesh/envoy:v1.32.0' } }),
    c('proxy-image: not a reference', 'enabled', { annotations: { [override('proxy-image')]: 'Not An Image' } }),
    c('proxy-image: a digest', 'enabled', { annotations: { [override('proxy-image')]: `envoyproxy/envoy@sha256:${'a'.repeat(64)}` } }),
    c('overrides of 100 KiB each: refused by the length bounds, cheaply', 'enabled', {
      annotations: { [override('proxy-cpu')]: '1'.repeat(100 * 1024), [override('proxy-image')]: `registry.example/${'a'.repeat(100 * 1024)}:1` },
    }),
    c('a Pod without volumes, pull secrets or annotations', 'plain', { annotations: { [INJECT]: 'true' }, spec: { restartPolicy: 'Never' } }),
    {
      title: 'a 1 MiB Pod (CEL cost)',
      namespace: 'enabled',
      pod: bigPod(largePod(), { [override('proxy-cpu')]: '150m' }),
    },
    {
      title: 'a 1 MiB Pod of 300 containers and 600 volumes, native (CEL cost)',
      namespace: 'enabled',
      pod: bigPod(largePod({ containers: 300, envVars: 3000, volumes: 600 }), { [NATIVE]: 'true', [override('proxy-memory')]: '100Mi' }),
    },
  ];
}

function bigPod(big: JsonObject, annotations: Record<string, string>): JsonObject {
  const metadata = isJsonObject(big['metadata']) ? big['metadata'] : {};
  return { ...big, metadata: { labels: metadata['labels'] ?? {}, annotations } };
}

/**
 * Pods from every combination of a few independent choices, so that rules
 * meet each other (what a property test would draw, but all of them).
 */
function combinations(): ParityCase[] {
  const cases: ParityCase[] = [];
  const injects = [undefined, 'true', 'false'] as const;
  const templates = [undefined, 'debug', 'native'] as const;
  const natives = [undefined, 'true', 'false'] as const;
  let index = 0;
  for (const inject of injects) {
    for (const template of templates) {
      for (const native of natives) {
        index += 1;
        const annotations: Record<string, string> = {};
        if (inject !== undefined) annotations[INJECT] = inject;
        if (template !== undefined) annotations[TEMPLATE] = template;
        if (native !== undefined) annotations[NATIVE] = native;
        // Vary the Pod's own lists with the index: missing, present, overlapping.
        const spec: JsonObject = {};
        if (index % 3 === 1) spec['volumes'] = [{ name: 'envoy-conf', emptyDir: {} }];
        if (index % 3 === 2) spec['initContainers'] = [{ name: 'first', image: 'registry.example/first:1' }];
        if (index % 4 === 0) spec['imagePullSecrets'] = [{ name: 'registry' }];
        if (index % 5 === 0) annotations[override('proxy-memory')] = `${index}Mi`;
        cases.push({
          title: `combination ${index}: inject=${inject ?? '-'} template=${template ?? '-'} native=${native ?? '-'}`,
          namespace: index % 2 === 0 ? 'enabled' : 'plain',
          pod: pod({ annotations, spec }),
        });
      }
    }
  }
  return cases;
}

/**
 * Random Pods (a fixed seed, so a failure can be replayed): names drawn from
 * a small set so the Pod's own entries often meet the template's, valid and
 * invalid overrides, any namespace kind.
 */
function randomPods(count: number, seed: number): ParityCase[] {
  const name = fc.constantFrom('envoy', 'config-reloader', 'envoy-init', 'app', 'web', 'log');
  // Names unique across both lists, as the API server wants them: a case refused on both paths says little.
  const containerLists = fc
    .uniqueArray(fc.record({ name, init: fc.boolean() }), { selector: (entry) => entry.name, maxLength: 4 })
    .map((entries) => ({
      containers: entries.filter((entry) => !entry.init).map((entry) => ({ name: entry.name, image: `registry.example/${entry.name}:1` })),
      initContainers: entries.filter((entry) => entry.init).map((entry) => ({ name: entry.name, image: `registry.example/${entry.name}:1` })),
    }));
  const volumes = fc.uniqueArray(fc.constantFrom('envoy-conf', 'envoy-cache', 'data', 'tmp'), { maxLength: 3 }).map((names) => names.map((n) => ({ name: n, emptyDir: {} })));
  const secrets = fc.uniqueArray(fc.constantFrom('registry', 'other'), { maxLength: 2 }).map((names) => names.map((n) => ({ name: n })));
  const quantity = fc.constantFrom('10m', '250m', '1', '1.5', '2Gi', '64Mi', '100M', '-1', 'x', '1n', '', '1e3', '0');
  const annotation = fc.record(
    {
      [INJECT]: fc.constantFrom('true', 'false', 'yes'),
      [LEGACY]: fc.constantFrom('true', 'false'),
      [TEMPLATE]: fc.constantFrom('config', 'debug', 'native', 'limits-only', 'nope'),
      [NATIVE]: fc.constantFrom('true', 'false', 'maybe'),
      [override('proxy-cpu')]: quantity,
      [override('proxy-memory')]: quantity,
      [override('proxy-cpu-limit')]: quantity,
      [override('proxy-memory-limit')]: quantity,
      [override('proxy-image')]: fc.constantFrom('envoyproxy/envoy:v1.32.1', 'bad image', 'localhost:5000/envoy'),
      'example.com/other': fc.constantFrom('a/b', '~', '~1'),
    },
    { requiredKeys: [] },
  );
  const arbitrary = fc.record({
    namespace: fc.constantFrom<NamespaceKind>('enabled', 'enabled', 'plain', 'disabled', 'excluded', 'canary', 'plain-canary', 'unknown-template', 'defaults', 'bad-defaults'),
    annotations: fc.option(annotation, { nil: undefined }),
    lists: containerLists,
    volumes: fc.option(volumes, { nil: undefined }),
    imagePullSecrets: fc.option(secrets, { nil: undefined }),
    hostNetwork: fc.integer({ min: 0, max: 4 }).map((draw) => draw === 0),
  });
  return fc.sample(arbitrary, { seed, numRuns: count }).map((drawn, index) => {
    const spec: JsonObject = { containers: [{ name: 'main', image: 'registry.example/main:1' }, ...drawn.lists.containers] };
    if (drawn.lists.initContainers.length > 0) spec['initContainers'] = drawn.lists.initContainers;
    if (drawn.volumes !== undefined) spec['volumes'] = drawn.volumes;
    if (drawn.imagePullSecrets !== undefined) spec['imagePullSecrets'] = drawn.imagePullSecrets;
    if (drawn.hostNetwork) spec['hostNetwork'] = true;
    const annotations: Record<string, string> | undefined =
      drawn.annotations === undefined ? undefined : Object.fromEntries(Object.entries(drawn.annotations).flatMap(([key, value]) => (value === undefined ? [] : [[key, String(value)]])));
    const metadata: JsonObject = annotations === undefined ? {} : { annotations };
    return { title: `random ${index} (seed ${seed})`, namespace: drawn.namespace, pod: { apiVersion: 'v1', kind: 'Pod', metadata, spec } };
  });
}

/** Traffic capture (issue 26): each switch and exclusion, bad values, hostNetwork, Pod Security, names taken, native and classic; CNI mode and auto (issue 37). */
function captureCases(): ParityCase[] {
  const CAPTURE = 'envoy-injector.io/capture';
  const x = (name: string): string => `envoy-injector.io/capture-${name}`;
  const c = (title: string, namespace: NamespaceKind, annotations: Record<string, string>, spec: JsonObject = {}): ParityCase => ({
    title: `capture: ${title}`,
    namespace,
    pod: pod({ annotations: { [TEMPLATE]: 'capture', ...annotations }, spec }),
  });
  return [
    c('asked for', 'enabled', { [CAPTURE]: 'true' }),
    c('not asked, off by default', 'enabled', {}),
    c('"false"', 'enabled', { [CAPTURE]: 'false' }),
    c('"yes" is ignored', 'enabled', { [CAPTURE]: 'yes' }),
    c('every exclusion', 'enabled', {
      [CAPTURE]: 'true',
      [x('exclude-outbound-cidrs')]: '10.96.0.0/12,fd00:10:96::/112',
      [x('exclude-outbound-ports')]: '5432,6379',
      [x('exclude-inbound-ports')]: '',
      [x('include-inbound-ports')]: '8080,8443',
    }),
    c('bad exclusions: the defaults apply', 'enabled', {
      [CAPTURE]: 'true',
      [x('exclude-outbound-cidrs')]: '10.0.0.0/33',
      [x('exclude-outbound-ports')]: '5432, 6379',
      [x('exclude-inbound-ports')]: '65536',
      [x('include-inbound-ports')]: '080',
    }),
    c('a 100 KiB exclusion: refused by the length bound', 'enabled', { [CAPTURE]: 'true', [x('exclude-outbound-ports')]: '80,'.repeat(34 * 1024) + '80' }),
    c('with init containers of its own: envoy-init goes last', 'enabled', { [CAPTURE]: 'true' }, { initContainers: [{ name: 'migrate', image: 'registry.example/migrate:1' }] }),
    c('native: envoy-init goes first', 'enabled', { [CAPTURE]: 'true', [NATIVE]: 'true' }, { initContainers: [{ name: 'migrate', image: 'registry.example/migrate:1' }] }),
    c('the Pod has its own envoy-init and volume of that name: kept', 'enabled', { [CAPTURE]: 'true' }, {
      initContainers: [{ name: 'envoy-init', image: 'registry.example/mine:1' }],
      volumes: [{ name: 'envoy-init-xtables-lock', emptyDir: {} }],
    }),
    c('the Pod has its own envoy: not injected, so not captured', 'enabled', { [CAPTURE]: 'true' }, {
      containers: [{ name: 'app', image: 'registry.example/app:1.0' }, { name: 'envoy', image: 'registry.example/my-envoy:2' }],
    }),
    c('its own envoy as an init container, native: not injected', 'enabled', { [CAPTURE]: 'true', [NATIVE]: 'true' }, { initContainers: [{ name: 'envoy', image: 'registry.example/my-envoy:2' }] }),
    c('hostNetwork: injected, never captured', 'plain', { [INJECT]: 'true', [CAPTURE]: 'true' }, { hostNetwork: true }),
    c('a Pod Security baseline namespace: injected, never captured', 'baseline', { [CAPTURE]: 'true' }),
    c('a baseline namespace, not asked', 'baseline', {}),
    c('a template on by default (native)', 'enabled', { [TEMPLATE]: 'capture-on' }),
    c('a template on by default, "false"', 'enabled', { [TEMPLATE]: 'capture-on', [CAPTURE]: 'false' }),
    c('a template on by default, in a baseline namespace', 'baseline', { [TEMPLATE]: 'capture-on' }),
    c('a template that cannot capture, asked for', 'enabled', { [TEMPLATE]: 'debug', [CAPTURE]: 'true' }),
    // TPROXY asked for where neither the template nor the namespace allows it (issue 50): REDIRECT in both (the webhook warns).
    c('TPROXY asked for, not allowed: REDIRECT', 'enabled', { [CAPTURE]: 'true', [x('interception')]: 'tproxy' }),
    // CNI mode (issue 37): the check container instead of envoy-init, the status's captureMode.
    c('CNI mode: the check, no lock volume', 'enabled', { [TEMPLATE]: 'capture-cni', [CAPTURE]: 'true', [x('exclude-outbound-ports')]: '5432' }),
    c('CNI mode in a baseline namespace: captured all the same', 'baseline', { [TEMPLATE]: 'capture-cni', [CAPTURE]: 'true' }),
    c('CNI mode, native, with init containers of its own: the check first', 'enabled', { [TEMPLATE]: 'capture-cni', [CAPTURE]: 'true', [NATIVE]: 'true' }, { initContainers: [{ name: 'migrate', image: 'registry.example/migrate:1' }] }),
    c('CNI mode, the Pod has its own envoy-capture-check: kept', 'enabled', { [TEMPLATE]: 'capture-cni', [CAPTURE]: 'true' }, { initContainers: [{ name: 'envoy-capture-check', image: 'registry.example/mine:1' }] }),
    c('CNI mode, hostNetwork: never captured', 'plain', { [TEMPLATE]: 'capture-cni', [INJECT]: 'true', [CAPTURE]: 'true' }, { hostNetwork: true }),
    c('auto: envoy-init where allowed', 'enabled', { [TEMPLATE]: 'capture-auto' }),
    c('auto in a baseline namespace: CNI mode', 'baseline', { [TEMPLATE]: 'capture-auto' }),
    c('auto in a baseline namespace, "false"', 'baseline', { [TEMPLATE]: 'capture-auto', [CAPTURE]: 'false' }),
    // An OpenShift uid range (issue 53): the proxy, the rules and the check take its ids; auto captures in CNI mode there.
    c('OpenShift range: the proxy as its last uid, envoy-init told so', 'openshift', { [CAPTURE]: 'true' }),
    c('OpenShift range, not captured: the proxy as its last uid all the same', 'openshift', {}),
    c('OpenShift range, CNI mode: the check as the uid below the proxy\'s', 'openshift', { [TEMPLATE]: 'capture-cni', [CAPTURE]: 'true' }),
    c('OpenShift range, auto: CNI mode for the range alone', 'openshift', { [TEMPLATE]: 'capture-auto' }),
    c('OpenShift range, a proxy without its own securityContext (native)', 'openshift', { [TEMPLATE]: 'capture-on' }),
    c('OpenShift range, an app running as the proxy\'s uid (the webhook warns)', 'openshift', { [TEMPLATE]: 'capture-cni', [CAPTURE]: 'true' }, { securityContext: { runAsUser: 1000629999 } }),
    c('OpenShift range of a size of 0: the template\'s ids, auto in CNI mode still', 'openshift-bad', { [TEMPLATE]: 'capture-auto' }),
    c('OpenShift range of a size of 0, CNI mode', 'openshift-bad', { [TEMPLATE]: 'capture-cni', [CAPTURE]: 'true' }),
    c('OpenShift range in the dash notation, bad groups: the uid range\'s last as the group', 'openshift-dash', { [TEMPLATE]: 'capture-cni', [CAPTURE]: 'true' }),
    c('OpenShift range, a template that cannot capture', 'openshift', { [TEMPLATE]: 'debug' }),
  ];
}

/** The central selectors both paths run with (serve's flags, compilePolicy's settings). */
export const PARITY_SELECTORS = {
  never: [{ matchLabels: { 'parity.example/plain': 'yes' } }, { matchExpressions: [{ key: 'parity.example/tier', operator: 'In', values: ['db', 'cache'] }] }],
  always: [{ matchExpressions: [{ key: 'parity.example/mesh', operator: 'Exists' }, { key: 'parity.example/tier', operator: 'NotIn', values: ['batch'] }] }],
} as const;

/** Issue 28: the namespace's template and proxy defaults, against the Pod's own; the central selectors. */
function namespaceCases(): ParityCase[] {
  const c = (title: string, namespace: NamespaceKind, annotations: Record<string, string> = {}, labels?: Record<string, string>): ParityCase => ({
    title,
    namespace,
    pod: pod({ annotations, ...(labels === undefined ? {} : { labels }) }),
  });
  const plainLabel = { 'parity.example/plain': 'yes' };
  const mesh = { 'parity.example/mesh': '' };
  return [
    c('never-inject selector, enabled namespace: skipped', 'enabled', {}, plainLabel),
    c('never-inject selector by In, enabled namespace: skipped', 'enabled', {}, { 'parity.example/tier': 'cache' }),
    c('never-inject selector, the Pod asks: injected', 'enabled', { [INJECT]: 'true' }, plainLabel),
    c('always-inject selector, plain namespace: injected', 'plain', {}, mesh),
    c('always-inject selector, its NotIn excludes the Pod: skipped', 'plain', {}, { ...mesh, 'parity.example/tier': 'batch' }),
    c('always-inject selector, the Pod says "false": skipped', 'plain', { [INJECT]: 'false' }, mesh),
    c('always and never: never wins', 'plain', {}, { ...mesh, ...plainLabel }),
    c('always-inject selector, disabled namespace: skipped', 'disabled', {}, mesh),
    c('always-inject selector, a namespace picking a template', 'plain-canary', {}, mesh),
    { title: 'always-inject selector, hostNetwork: skipped', namespace: 'plain', pod: pod({ labels: mesh, spec: { hostNetwork: true } }) },
    c('a namespace picking the debug template, with a cpu default', 'canary'),
    c("the Pod's template beats its namespace's", 'canary', { [TEMPLATE]: 'config' }),
    c("the Pod's proxy-cpu beats its namespace's", 'canary', { [override('proxy-cpu')]: '300m' }),
    c("an invalid Pod proxy-cpu falls back to the namespace's", 'canary', { [override('proxy-cpu')]: 'x' }),
    c('a plain namespace picking a template: not asked', 'plain-canary'),
    c('a plain namespace picking a template: asked', 'plain-canary', { [INJECT]: 'true' }),
    c('a namespace picking an unknown template: skipped', 'unknown-template'),
    c('a namespace picking an unknown template, the Pod names a known one', 'unknown-template', { [TEMPLATE]: 'debug' }),
    c('every proxy default of the namespace', 'defaults'),
    c("the Pod's own values beat some of the namespace's", 'defaults', { [override('proxy-memory')]: '128Mi', [override('proxy-image')]: 'registry.example/envoy:v1.34.0' }),
    c("a Pod's request above its namespace's limit: the namespace's values stay", 'defaults', { [override('proxy-cpu')]: '3' }),
    c("a Pod's limit below its namespace's request: the namespace's values stay", 'defaults', { [override('proxy-memory-limit')]: '64Mi' }),
    c('invalid and conflicting namespace defaults: ignored, the Pod injected', 'bad-defaults'),
    c('invalid namespace defaults, the Pod sets its own', 'bad-defaults', { [override('proxy-memory')]: '32Mi', [override('proxy-cpu')]: '100m' }),
    c('invalid namespace defaults, the Pod takes the default template', 'bad-defaults', { [TEMPLATE]: 'config' }),
  ];
}

/** The proxy in the Pod's life (issue 25): holding each way, the drain fitted to the grace period, the autoscaler list kept and extended. */
function lifecycleCases(): ParityCase[] {
  const HOLD = 'envoy-injector.io/hold-application';
  const EVICT = 'cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes';
  const c = (title: string, annotations: Record<string, string>, spec: JsonObject = {}): ParityCase => ({
    title: `lifecycle: ${title}`,
    namespace: 'enabled',
    pod: pod({ annotations: { [TEMPLATE]: 'lifecycle', ...annotations }, spec }),
  });
  return [
    c('classic, holding: first, postStart and preStop', {}),
    c('native, holding: a startupProbe', { [NATIVE]: 'true' }),
    c('classic, hold-application "false"', { [HOLD]: 'false' }),
    c('native, hold-application "false"', { [HOLD]: 'false', [NATIVE]: 'true' }),
    c('hold-application "nope" is ignored', { [HOLD]: 'nope' }),
    c('a grace period of 4 s: the drain shortened to 3', {}, { terminationGracePeriodSeconds: 4 }),
    c('a grace period of 0: no preStop', {}, { terminationGracePeriodSeconds: 0 }),
    c('a grace period of 60: the whole drain', {}, { terminationGracePeriodSeconds: 60 }),
    c("the Pod's own autoscaler list: kept and extended", { [EVICT]: 'cache' }, { volumes: [{ name: 'cache', emptyDir: {} }] }),
    c("the Pod's own autoscaler list naming ours, with a space", { [EVICT]: 'node-logs, cache' }),
    c("the Pod's own autoscaler list ending in a comma", { [EVICT]: 'cache,' }),
    c("the Pod's own autoscaler list, empty", { [EVICT]: '' }),
    c("the Pod's own envoy-scratch volume: not named", {}, { volumes: [{ name: 'envoy-scratch', configMap: { name: 'x' } }] }),
    c("the Pod's own envoy: not injected, nothing added", {}, { containers: [{ name: 'app', image: 'registry.example/app:1.0' }, { name: 'envoy', image: 'registry.example/my-envoy:2' }] }),
    c('a Pod without annotations otherwise', {}),
    { title: 'lifecycle: a Pod without annotations (the default template is not the lifecycle one)', namespace: 'enabled', pod: pod({}) },
    c('own hooks and probe, classic', { [TEMPLATE]: 'lifecycle-own' }),
    c('own hooks and probe, native, hold "true"', { [TEMPLATE]: 'lifecycle-own', [NATIVE]: 'true', [HOLD]: 'true' }),
    c('own hooks, classic, hold "true", a 2 s grace period', { [TEMPLATE]: 'lifecycle-own', [HOLD]: 'true' }, { terminationGracePeriodSeconds: 2 }),
  ];
}

/** The quantity forms of issue 34, as written in a Pod (the API server hands admission their canonical text). */
export const ODD_QUANTITIES = ['0.5', '500m', '1e3', '1Ki', '128974848', '129e6', '129M', '123Mi'] as const;

/**
 * Pod-level resources (issue 34): both paths pad them alike, each value by
 * what the injected containers add to the API server's aggregate, and the
 * API server takes the Pod; a Pod neither can pad (a value at 10^15 or
 * more) is left alike. Only on API servers that serve spec.resources
 * (1.34+), as policy mode is.
 */
function podResourcesCases(): ParityCase[] {
  const app = (resources: JsonObject): JsonObject => ({ containers: [{ name: 'app', image: 'registry.example/app:1.0', resources }] });
  const c = (title: string, annotations: Record<string, string>, spec: JsonObject): ParityCase => ({ title: `pod resources: ${title}`, namespace: 'enabled', pod: pod({ annotations, spec }) });
  const sidecarAndInit = [
    { name: 'log', image: 'registry.example/log:1', restartPolicy: 'Always', resources: { requests: { cpu: '200m', memory: '32Mi' }, limits: { cpu: '500m', memory: '64Mi' } } },
    { name: 'migrate', image: 'registry.example/migrate:1', resources: { requests: { cpu: '1', memory: '128Mi' } } },
  ];
  const forms = ODD_QUANTITIES.flatMap((form) => [
    c(`requests of ${form}`, {}, { ...app({}), resources: { requests: { cpu: form, memory: form } } }),
    c(`limits of ${form}, native`, { [NATIVE]: 'true' }, { ...app({}), resources: { limits: { cpu: form, memory: form } } }),
    c(`requests and limits of ${form}, capture`, { [TEMPLATE]: 'capture-on' }, { ...app({}), resources: { requests: { cpu: form, memory: form }, limits: { cpu: form, memory: form } } }),
  ]);
  return [
    c('requests only, classic', {}, { ...app({ requests: { cpu: '100m', memory: '64Mi' } }), resources: { requests: { cpu: '100m', memory: '64Mi' } } }),
    c('limits only, native', { [NATIVE]: 'true' }, { ...app({}), resources: { limits: { cpu: '2', memory: '1Gi' } } }),
    c('requests and limits, a big init container', {}, {
      ...app({ requests: { cpu: '100m' }, limits: { cpu: '500m' } }),
      initContainers: [{ name: 'migrate', image: 'registry.example/migrate:1', resources: { requests: { cpu: '2' } } }],
      resources: { requests: { cpu: '2' }, limits: { cpu: '3' } },
    }),
    c('capture, native', { [TEMPLATE]: 'capture-on' }, { ...app({ requests: { cpu: '50m', memory: '32Mi' } }), resources: { requests: { cpu: '50m', memory: '32Mi' } } }),
    ...[{}, { [NATIVE]: 'true' }, { [TEMPLATE]: 'capture' }, { [TEMPLATE]: 'capture', [NATIVE]: 'true' }].map((annotations, index) =>
      c(`its own native sidecar and init container, requests and limits (${index})`, annotations, {
        ...app({ requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '1', memory: '256Mi' } }),
        initContainers: sidecarAndInit,
        resources: { requests: { cpu: '1200m', memory: '256Mi' }, limits: { cpu: '2', memory: '512Mi' } },
      }),
    ),
    c('Guaranteed at the Pod level', {}, { ...app({ requests: { cpu: '200m' } }), resources: { requests: { cpu: '500m', memory: '128Mi' }, limits: { cpu: '500m', memory: '128Mi' } } }),
    c('limits only, a template with limits only', { [TEMPLATE]: 'limits-only' }, { ...app({}), resources: { limits: { cpu: '129e6', memory: '1e3' } } }),
    c('overrides in odd forms', { [override('proxy-cpu')]: '0.25', [override('proxy-memory')]: '1.5Mi', [override('proxy-cpu-limit')]: '2e0', [override('proxy-memory-limit')]: '0.5Gi' }, {
      ...app({}),
      resources: { requests: { cpu: '1', memory: '128974848' }, limits: { cpu: '4', memory: '1Gi' } },
    }),
    c('hugepages, which no injected container carries, left as they are', {}, { ...app({}), resources: { requests: { cpu: '1', memory: '1Gi', 'hugepages-2Mi': '2Mi' }, limits: { memory: '1Gi', 'hugepages-2Mi': '2Mi' } } }),
    c('a template without resources: nothing to pad', { [TEMPLATE]: 'native' }, { ...app({}), resources: { requests: { cpu: '1' } } }),
    c('a value at 10^15 or more: left alike, uninjected', {}, { ...app({}), resources: { limits: { memory: '999Pi' } } }),
    ...[false, true].map((over) => {
      // 1 MiB with Pod-level resources at the bounds of what both modes pad (policy mode's CEL cost): padded, or one init container more and left alike.
      const big = bigPod(largePod({ containers: 200, envVars: 3000, volumes: 600 }), { [NATIVE]: 'true' });
      const spec = big['spec'] as JsonObject;
      for (const container of spec['containers'] as JsonObject[]) container['resources'] = { requests: { cpu: '1m', memory: '1Mi' }, limits: { cpu: '2m', memory: '2Mi' } };
      // The template adds envoy, config-reloader and envoy-init: MAX_PADDED_INIT_CONTAINERS in all, or one more.
      const inits = MAX_PADDED_INIT_CONTAINERS - 3 + (over ? 1 : 0);
      spec['initContainers'] = Array.from({ length: inits }, (_, index) => ({ name: `init-${index}`, image: 'registry.example/init:1', resources: { requests: { cpu: '1m', memory: '1Mi' } }, ...(index < inits / 2 ? { restartPolicy: 'Always' } : {}) }));
      spec['resources'] = { requests: { cpu: '100', memory: '100Gi' }, limits: { cpu: '200', memory: '200Gi' } };
      return { title: `pod resources: 1 MiB, ${inits} init containers of its own, half of them native sidecars (${over ? 'one over the bound: left alike' : 'padded'})`, namespace: 'enabled' as const, pod: big };
    }),
    c('1E of memory: left alike, uninjected', { [NATIVE]: 'true' }, { ...app({}), resources: { requests: { memory: '1E' } } }),
    c('an override in a form neither pads (a binary suffix after 4 decimals): left alike, uninjected', { [override('proxy-memory')]: '0.0001Ki' }, { ...app({}), resources: { requests: { memory: '1Gi' } } }),
    ...forms,
  ];
}

/**
 * Issue 50: Pods other meshes injected (Istio, Linkerd, Kuma, Consul), Pods
 * that only carry their opt-ins, and Pods with a container of the proxy's
 * name of their own (test/fixtures/other-mesh-pods.yaml), in an enabled
 * namespace and asking.
 */
export function otherMeshCases(): ParityCase[] {
  return parseYamlDocuments(readFileSync(join(ROOT, OTHER_MESH_PODS), 'utf8'))
    .filter(isJsonObject)
    .flatMap((document) => {
      const metadata = document['metadata'] as JsonObject;
      const { name, ...rest } = metadata;
      const asking = { ...rest, annotations: { ...(rest['annotations'] as JsonObject), [INJECT]: 'true' } };
      return [
        { title: `other meshes: ${String(name)}`, namespace: NamespaceKind.enabled, pod: { ...document, metadata: rest } },
        { title: `other meshes: ${String(name)}, asking`, namespace: NamespaceKind.plain, pod: { ...document, metadata: asking } },
      ];
    });
}

/** Other meshes' Pods, each annotated with what it expects (`OTHER_MESH_EXPECT`): a mesh's name, `proxy_name_taken` or `inject`. */
export const OTHER_MESH_PODS = 'test/fixtures/other-mesh-pods.yaml';
export const OTHER_MESH_EXPECT = 'envoy-injector.example/expect';

export const RANDOM_SEED = 12;

export function parityCases(randomCount = 40): ParityCase[] {
  return [...goldenCorpus(), ...handWritten(), ...captureCases(), ...namespaceCases(), ...lifecycleCases(), ...podResourcesCases(), ...otherMeshCases(), ...combinations(), ...randomPods(randomCount, RANDOM_SEED)];
}
