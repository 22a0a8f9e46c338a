import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import type { JsonObject } from '../../src/injection/index.js';
import { startChartParityRun, type ChartParityRun } from './chart-parity-run.js';
import { forEachKubeVersion, servedPolicyApiVersion } from './control-plane.js';
import { isInjected, ParityRun, Path } from './policy-parity.js';
import { ODD_QUANTITIES, type NamespaceKind } from './policy-parity-cases.js';

/**
 * The invariant of docs/design.md §14, "injection never makes a valid Pod
 * invalid", on a real API server: Pods using each Pod feature of Kubernetes
 * 1.33-1.36 are created as written (in a namespace the injector skips) and
 * through the injector (webhook and policy mode), classic and native,
 * capture off and on, with the chart's own default template. Whenever the
 * API server accepts the Pod as written, it must accept it injected, or the
 * injector must leave it as it was for a reason the feature names. A feature
 * the version does not serve (the Pod as written refused) is skipped, by name.
 */

type Outcome = 'injected' | 'uninjected';

interface Feature {
  readonly title: string;
  readonly spec: JsonObject;
  /** Created in a namespace enforcing Pod Security `restricted`. */
  readonly restricted?: boolean;
  /** The Pod's own annotations, beside each variant's. */
  readonly annotations?: Record<string, string>;
  /** What each mode does when the Pod as written is accepted (default: injected); per variant when it depends on capture. */
  readonly webhook?: Outcome | ((variant: Variant) => Outcome);
  readonly policy?: Outcome;
  /** A warning the webhook gives when it leaves the Pod as it was. */
  readonly skipWarning?: RegExp;
}

const app = (extra: JsonObject = {}): JsonObject => ({ name: 'app', image: 'registry.example/app:1.0', ...extra });
const restrictedContext = { runAsNonRoot: true, runAsUser: 1000, allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, seccompProfile: { type: 'RuntimeDefault' } };

/** The API server's bound on a Pod's annotations, keys and values in bytes (ValidateAnnotationsSize). */
const ANNOTATIONS_LIMIT = 262144;
const TOO_LARGE = /annotations would total \d+ bytes, over the API server's limit of 262144/;

/**
 * Issue 50: 341 PROXY protocol ports (2,045 characters, the list's bound is
 * 2,048) and 70 containers with 210 tcpSocket probes of captured ports: a
 * valid Pod whose per-Pod bootstrap alone is over 256 KiB.
 */
function bootstrapTooLarge(): Feature {
  const containers = Array.from({ length: 70 }, (_, index) => {
    const probe = (offset: number): JsonObject => ({ tcpSocket: { port: 30000 + 3 * index + offset }, periodSeconds: 10 });
    return { name: `app-${index}`, image: 'registry.example/app:1.0', startupProbe: probe(0), readinessProbe: probe(1), livenessProbe: probe(2) };
  });
  return {
    title: 'the PROXY protocol on 341 ports and 70 containers with 210 tcpSocket probes (a per-Pod bootstrap over 256 KiB under capture, issue 50)',
    annotations: { 'envoy-injector.io/inbound-proxy-protocol': Array.from({ length: 341 }, (_, index) => 20000 + index).join(',') },
    spec: { containers },
    // Without capture there is no bootstrap; policy mode writes none (docs/policy-mode.md).
    webhook: (variant) => (variant.capture === 'true' ? 'uninjected' : 'injected'),
    skipWarning: TOO_LARGE,
  };
}

/**
 * Issue 50: a Pod whose own annotations are 100 bytes short of the bound, in
 * two-byte characters (as many code points as half the bytes: a count of
 * characters would let the status annotation through). Any injection pushes
 * it over: both modes leave it as it was.
 */
function ownAnnotationsNearBound(): Feature {
  const fixed = { 'envoy-injector.io/inject': 'true', 'envoy-injector.io/native-sidecar': 'false', 'envoy-injector.io/capture': 'false' };
  const key = 'example.com/notes';
  const fixedBytes = Object.entries(fixed).reduce((sum, [name, value]) => sum + Buffer.byteLength(name) + Buffer.byteLength(value), 0);
  const room = ANNOTATIONS_LIMIT - 100 - fixedBytes - Buffer.byteLength(key);
  return {
    title: 'its own annotations 100 bytes short of the API server\'s 256 KiB, in two-byte characters (issue 50)',
    annotations: { [key]: 'é'.repeat(Math.floor(room / 2)) },
    spec: { containers: [app()] },
    webhook: 'uninjected',
    policy: 'uninjected',
    skipWarning: TOO_LARGE,
  };
}

const FEATURES: readonly Feature[] = [
  { title: 'a plain Pod', spec: { containers: [app()] } },
  { title: 'Pod-level requests', spec: { resources: { requests: { cpu: '100m', memory: '64Mi' } }, containers: [app({ resources: { requests: { cpu: '100m', memory: '64Mi' } } })] } },
  { title: 'Pod-level limits only (requests defaulted from them)', spec: { resources: { limits: { cpu: '1', memory: '1Gi' } }, containers: [app()] } },
  {
    title: 'Pod-level requests and limits, an init container and a native sidecar of its own',
    spec: {
      resources: { requests: { cpu: '1200m', memory: '256Mi' }, limits: { cpu: '2', memory: '512Mi' } },
      initContainers: [
        { name: 'log', image: 'registry.example/log:1', restartPolicy: 'Always', resources: { requests: { cpu: '200m', memory: '32Mi' }, limits: { cpu: '500m', memory: '64Mi' } } },
        { name: 'migrate', image: 'registry.example/migrate:1', resources: { requests: { cpu: '1', memory: '128Mi' } } },
      ],
      containers: [app({ resources: { requests: { cpu: '100m', memory: '64Mi' }, limits: { cpu: '1', memory: '256Mi' } } })],
    },
  },
  { title: 'Pod-level resources Guaranteed (requests equal limits)', spec: { resources: { requests: { cpu: '500m', memory: '128Mi' }, limits: { cpu: '500m', memory: '128Mi' } }, containers: [app({ resources: { requests: { cpu: '200m' } } })] } },
  ...ODD_QUANTITIES.map((form) => ({
    title: `Pod-level requests and limits of ${form}, a native sidecar and an init container of its own`,
    spec: {
      resources: { requests: { cpu: form, memory: form }, limits: { cpu: form, memory: form } },
      initContainers: [
        { name: 'log', image: 'registry.example/log:1', restartPolicy: 'Always', resources: { requests: { cpu: '1m', memory: '1' } } },
        { name: 'migrate', image: 'registry.example/migrate:1', resources: { requests: { cpu: '2m', memory: '2' } } },
      ],
      containers: [app({ resources: { requests: { cpu: '1m', memory: '1' } } })],
    },
  })),
  { title: 'hostUsers: false (user namespaces)', spec: { hostUsers: false, containers: [app()] } },
  { title: 'spec.os.name: linux', spec: { os: { name: 'linux' }, containers: [app()] } },
  { title: 'spec.os.name: windows', spec: { os: { name: 'windows' }, containers: [app()] }, webhook: 'uninjected', policy: 'uninjected' },
  { title: 'a nodeSelector for Windows nodes', spec: { nodeSelector: { 'kubernetes.io/os': 'windows' }, containers: [app()] }, webhook: 'uninjected', policy: 'uninjected' },
  { title: 'the sleep lifecycle action', spec: { terminationGracePeriodSeconds: 20, containers: [app({ lifecycle: { preStop: { sleep: { seconds: 5 } } } })] } },
  { title: 'resizePolicy', spec: { containers: [app({ resizePolicy: [{ resourceName: 'cpu', restartPolicy: 'NotRequired' }, { resourceName: 'memory', restartPolicy: 'RestartContainer' }], resources: { requests: { cpu: '100m', memory: '64Mi' } } })] } },
  {
    title: 'native sidecars and init containers of its own',
    spec: { initContainers: [{ name: 'vault-agent', image: 'registry.example/vault:1', restartPolicy: 'Always' }, { name: 'migrate', image: 'registry.example/migrate:1' }], containers: [app()] },
  },
  { title: 'automountServiceAccountToken: false', spec: { automountServiceAccountToken: false, containers: [app()] } },
  { title: 'dnsPolicy: None', spec: { dnsPolicy: 'None', dnsConfig: { nameservers: ['192.0.2.53'], searches: ['svc.example'] }, containers: [app()] } },
  { title: 'shareProcessNamespace', spec: { shareProcessNamespace: true, containers: [app()] } },
  { title: 'restricted Pod Security by container-level fields only', restricted: true, spec: { containers: [app({ securityContext: restrictedContext })] } },
  {
    title: 'tcpSocket probes (rewritten under capture, issue 41): a named port, a native sidecar\'s, one with host',
    spec: {
      initContainers: [{ name: 'log', image: 'registry.example/log:1', restartPolicy: 'Always', readinessProbe: { tcpSocket: { port: 7000 } } }],
      containers: [
        app({
          ports: [{ name: 'http', containerPort: 8080 }],
          readinessProbe: { tcpSocket: { port: 'http' }, periodSeconds: 2 },
          livenessProbe: { tcpSocket: { port: 8081 }, failureThreshold: 2 },
          startupProbe: { tcpSocket: { port: 80, host: 'db.example' } },
        }),
      ],
    },
  },
  {
    title: 'the PROXY protocol on two ports and tcpSocket probes of one (one per-Pod bootstrap under capture, issue 41)',
    annotations: { 'envoy-injector.io/inbound-proxy-protocol': '5672,8080' },
    spec: { containers: [app({ ports: [{ name: 'amqp', containerPort: 5672 }], readinessProbe: { tcpSocket: { port: 'amqp' } } })] },
  },
  bootstrapTooLarge(),
  ownAnnotationsNearBound(),
  {
    title: 'an image volume (ImageVolume)',
    spec: { volumes: [{ name: 'models', image: { reference: 'registry.example/models:1', pullPolicy: 'IfNotPresent' } }], containers: [app({ volumeMounts: [{ name: 'models', mountPath: '/models' }] })] },
  },
];

const VARIANTS = [
  { name: 'classic', native: 'false', capture: 'false' },
  { name: 'classic, capture', native: 'false', capture: 'true' },
  { name: 'native', native: 'true', capture: 'false' },
  { name: 'native, capture', native: 'true', capture: 'true' },
] as const;
type Variant = (typeof VARIANTS)[number];

forEachKubeVersion('every valid Pod stays valid: the Pod features of Kubernetes 1.33-1.36, as written and injected', (plane, version) => {
  const apiVersion = servedPolicyApiVersion(version);
  if (apiVersion === undefined) {
    it(`${version}: skipped, it serves none of these features (no Pod-level resources, native sidecars off by default, no policy mode); the other files of this tier cover it`, () => undefined);
    return;
  }
  let chart: ChartParityRun | undefined;
  let run: ParityRun | undefined;
  before(async () => {
    // The chart's own default template: the proxy a user gets, restricted-compliant, able to capture.
    chart = await startChartParityRun(plane(), apiVersion);
    ({ run } = chart);
  });
  after(async () => {
    await chart?.stop();
  });

  it(`a Pod the API server accepts as written is accepted injected, or left as it was (${FEATURES.length} features x ${VARIANTS.length} variants x webhook and policy)`, async (t) => {
    assert.ok(run !== undefined);
    const problems: string[] = [];
    let checked = 0;
    let index = 0;
    for (const feature of FEATURES) {
      const written: NamespaceKind = feature.restricted === true ? 'restricted-disabled' : 'disabled';
      const through: NamespaceKind = feature.restricted === true ? 'restricted' : 'enabled';
      const pod = (annotations: Record<string, string>): JsonObject => ({ apiVersion: 'v1', kind: 'Pod', metadata: { annotations: { ...feature.annotations, ...annotations } }, spec: feature.spec });
      const asWritten = await run.createIn(Path.webhook, written, pod({}), `written-${++index}`);
      const refused = (asWritten.stored as JsonObject)['refused'];
      if (refused !== undefined) {
        t.diagnostic(`Kubernetes ${version} does not serve "${feature.title}" (the Pod as written is refused: ${String((asWritten.stored as JsonObject)['message'])}): skipped`);
        continue;
      }
      assert.ok(!isInjected(asWritten.stored), `${feature.title}: created as written in a namespace labeled disabled`);
      // A field behind a feature gate that is off is dropped, not refused: such a Pod says nothing of the feature.
      const dropped = missingPaths(feature.spec, ((asWritten.stored as JsonObject)['spec'] ?? {}) as JsonObject, 'spec');
      if (dropped.length > 0) {
        t.diagnostic(`Kubernetes ${version} does not serve "${feature.title}" (it dropped ${dropped.join(', ')}): skipped`);
        continue;
      }
      for (const variant of VARIANTS) {
        const annotations = { 'envoy-injector.io/native-sidecar': variant.native, 'envoy-injector.io/capture': variant.capture };
        const resources: Partial<Record<Path, string>> = {};
        for (const path of [Path.webhook, Path.policy]) {
          const { stored, warnings } = await run.createIn(path, through, pod(annotations), `injected-${++index}`);
          resources[path] = JSON.stringify(((stored as JsonObject)['spec'] as JsonObject | undefined)?.['resources']);
          checked += 1;
          const where = `${feature.title} (${variant.name}, ${path})`;
          const answer = stored as JsonObject;
          if (answer['refused'] !== undefined) {
            problems.push(`${where}: accepted as written, refused injected: ${String(answer['message'])}`);
            continue;
          }
          const wanted = path === Path.webhook ? feature.webhook : feature.policy;
          const expected = (typeof wanted === 'function' ? wanted(variant) : wanted) ?? 'injected';
          const outcome: Outcome = isInjected(stored) ? 'injected' : 'uninjected';
          if (outcome !== expected) problems.push(`${where}: ${outcome}, expected ${expected}${warnings.length > 0 ? ` (warnings: ${warnings.join(' | ')})` : ''}`);
          const { skipWarning } = feature;
          if (path === Path.webhook && outcome === 'uninjected' && skipWarning !== undefined && !warnings.some((warning) => skipWarning.test(warning))) {
            problems.push(`${where}: left as it was without the warning ${String(skipWarning)} (warnings: ${warnings.join(' | ')})`);
          }
        }
        // Pod-level resources: both modes store the same padded values.
        if (resources.webhook !== resources.policy) problems.push(`${feature.title} (${variant.name}): spec.resources ${String(resources.webhook)} through the webhook, ${String(resources.policy)} through the policy`);
      }
    }
    t.diagnostic(`Kubernetes ${version}: ${checked} injected Pods checked against their Pods as written`);
    assert.deepEqual(problems, []);
    assert.ok(checked >= 100, `only ${checked} Pods were checked`);
  });
});

/** The paths of WANTED (its keys, list items by index) that STORED lacks. */
function missingPaths(wanted: unknown, stored: unknown, path: string): string[] {
  if (Array.isArray(wanted)) {
    if (!Array.isArray(stored)) return [path];
    return wanted.flatMap((item, index) => missingPaths(item, stored[index], `${path}[${index}]`));
  }
  if (wanted !== null && typeof wanted === 'object') {
    if (stored === null || typeof stored !== 'object' || Array.isArray(stored)) return [path];
    return Object.entries(wanted).flatMap(([key, item]) => (key in stored ? missingPaths(item, (stored as Record<string, unknown>)[key], `${path}.${key}`) : [`${path}.${key}`]));
  }
  return [];
}
