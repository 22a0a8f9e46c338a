import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { before, describe, it } from 'node:test';
import { generate } from 'selfsigned';
import {
  admitPod,
  applyPodPatch,
  decideInjection,
  InjectedLabel,
  parseLabelSelectors,
  injectPod,
  parseTemplateData,
  parseYaml,
  type JsonObject,
  type TemplateSet,
} from '../src/injection/index.js';
import { seedPod } from './helpers/fixtures.js';
import { parseSelectorsOption } from '../src/commands/options.js';
import { CHART_DIR, ensureHelm, helm, KUBE_VERSION, NAMESPACE, only, RELEASE, renderChart, valuesArgs, type Manifest } from './helpers/helm.js';
import { schemaProblems } from './helpers/kube-schema.js';
import { evaluateCondition, webhooksCalled, type Webhook } from './helpers/selectors.js';
import { bootstrapProblems } from './helpers/envoy-bootstrap.js';
import { valueRows } from './helpers/values-reference.js';

// ---- what the chart is rendered with -------------------------------------

const CUSTOM_TEMPLATE = `containers:
  - name: proxy
    image: registry.example.com/proxy:2.1.0
    args: ["--listen", ":15001"]
    resources:
      requests: {cpu: 10m, memory: 16Mi}
      limits: {memory: 64Mi}
`;

async function makeCa(): Promise<string> {
  const pems = await generate([{ name: 'commonName', value: 'envoy-injector test CA' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [{ name: 'basicConstraints', cA: true, critical: true }],
  });
  return pems.cert;
}

interface Scenario {
  readonly values: Record<string, unknown>;
}

let caPem = '';
/** Central selectors as the chart takes them (issue 28). */
const CHART_SELECTORS = {
  never: [{ matchLabels: { app: 'etcd' } }],
  always: [{ matchLabels: { mesh: 'member' }, matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['batch', 'cron'] }] }, { matchExpressions: [{ key: 'always.example.com/on', operator: 'Exists' }] }],
};
const scenarios = (): Record<string, Scenario> => ({
  default: { values: {} },
  auto: { values: { certificates: { mode: 'auto' } } },
  certManager: { values: { certificates: { mode: 'certManager' } } },
  secret: { values: { certificates: { mode: 'secret', secretName: 'my-webhook-tls', caBundle: caPem } } },
  secretBase64: { values: { certificates: { mode: 'secret', secretName: 'my-webhook-tls', caBundle: Buffer.from(caPem).toString('base64') } } },
  noMatchConditions: { values: { webhook: { matchConditions: false } } },
  noLaterOptIn: { values: { webhook: { laterOptIn: false } } },
  failOpen: { values: { webhook: { failurePolicy: 'Ignore' } } },
  hpa: { values: { autoscaling: { enabled: true, minReplicas: 3, maxReplicas: 7 } } },
  excluded: { values: { excludedNamespaces: ['legacy', 'batch-jobs'] } },
  selectors: { values: { neverInjectSelector: CHART_SELECTORS.never, alwaysInjectSelector: CHART_SELECTORS.always } },
  proxyIpv4Only: { values: { proxy: { listenAddress: '0.0.0.0', healthPort: 15021 } } },
  capture: {
    values: {
      proxy: {
        adminPort: 15000,
        capture: {
          enabled: true,
          image: { repository: 'registry.example.com/envoy-injector-init', tag: '0.1.0' },
          outboundPort: 16001,
          inboundPort: 16006,
          excludeOutboundCidrs: ['169.254.169.254/32', 'fd00:ec2::254/128'],
          excludeOutboundPorts: [5432],
          excludeInboundPorts: [15090, 15091],
          includeInboundPorts: [],
        },
      },
    },
  },
  captureCni: { values: { image: { repository: 'registry.example.com/envoy-injector', tag: '0.2.0' }, proxy: { capture: { enabled: true, mode: 'cni' } } } },
  customTemplate: {
    values: {
      templates: {
        config: CUSTOM_TEMPLATE,
        named: { debug: { containers: [{ name: 'debug', image: 'busybox:1.37', command: ['sleep', 'infinity'] }] } },
      },
    },
  },
  metrics: { values: { metrics: { port: 9090 }, priorityClassName: 'system-cluster-critical', podAnnotations: { team: 'platform' }, clusterDomain: 'k8s.example' } },
  longNames: { values: { fullnameOverride: 'a'.repeat(70), nameOverride: 'b'.repeat(63) } },
  options: {
    values: {
      image: { repository: 'registry.example.com/envoy-injector', digest: `sha256:${'c'.repeat(64)}` },
      extraEnv: [{ name: 'NODE_OPTIONS', value: '--max-old-space-size=192' }],
      proxy: { runAsUser: null, image: { tag: 'v1.39.5' } },
      podDisruptionBudget: { minAvailable: '50%' },
      shutdown: { preStopDelaySeconds: 0 },
    },
  },
});

const rendered = new Map<string, Manifest[]>();
function manifestsOf(name: string): Manifest[] {
  const manifests = rendered.get(name);
  if (manifests === undefined) throw new Error(`scenario ${name} was not rendered`);
  return manifests;
}

// ---- helpers over rendered objects ----------------------------------------

type Obj = Record<string, unknown>;
const at = (value: unknown, ...path: (string | number)[]): unknown =>
  path.reduce<unknown>((node, key) => (node !== null && typeof node === 'object' ? (node as Obj)[key as string] : undefined), value);

function podSpec(manifests: Manifest[]): Obj {
  return at(only(manifests, 'Deployment'), 'spec', 'template', 'spec') as Obj;
}
function injectorContainer(manifests: Manifest[]): Obj {
  const containers = podSpec(manifests)['containers'] as Obj[];
  assert.equal(containers.length, 1);
  return containers[0] as Obj;
}
function envOf(manifests: Manifest[]): Map<string, unknown> {
  return new Map((injectorContainer(manifests)['env'] as Obj[]).map((entry) => [entry['name'] as string, entry['value'] ?? entry['valueFrom']]));
}
function webhooksOf(manifests: Manifest[]): Webhook[] {
  return only(manifests, 'MutatingWebhookConfiguration')['webhooks'] as Webhook[];
}
function templatesOf(manifests: Manifest[]): TemplateSet {
  return parseTemplateData(only(manifests, 'ConfigMap')['data'] as Record<string, string>);
}
/** The default template's Envoy container and its inline bootstrap. */
function defaultEnvoy(manifests: Manifest[]): { envoy: Obj; bootstrap: Obj } {
  const envoy = templatesOf(manifests).defaultTemplate.containers[0] as Obj;
  const args = envoy['args'] as string[];
  assert.equal(args[0], '--config-yaml');
  return { envoy, bootstrap: parseYaml(args[1] as string) as Obj };
}

const FULLNAME = `${RELEASE}-envoy-injector`;
/** Cluster-scoped objects carry the release namespace too. */
const CLUSTER_NAME = `${FULLNAME}-${NAMESPACE}`;

// ---- the tests ------------------------------------------------------------

describe('Helm chart charts/envoy-injector', { timeout: 180_000 }, () => {
  before(async () => {
    await ensureHelm();
    caPem = await makeCa();
    const all = scenarios();
    await Promise.all(Object.entries(all).map(async ([name, { values }]) => rendered.set(name, await renderChart(values))));
  });

  it('passes helm lint --strict, with default values and with every scenario', async () => {
    const results = await Promise.all(
      Object.entries(scenarios()).map(async ([name, { values }]) => ({
        name,
        result: await helm(['lint', '--strict', CHART_DIR, '--namespace', NAMESPACE, '--kube-version', KUBE_VERSION, ...(await valuesArgs(values))]),
      })),
    );
    for (const { name, result } of results) {
      assert.equal(result.code, 0, `${name}: ${result.stdout}${result.stderr}`);
      assert.match(result.stdout, /1 chart\(s\) linted, 0 chart\(s\) failed/);
    }
  });

  it('declares apiVersion v2, kubeVersion >= 1.25 and refuses older clusters', async () => {
    const chart = parseYaml(readFileSync(`${CHART_DIR}/Chart.yaml`, 'utf8')) as Obj;
    assert.equal(chart['apiVersion'], 'v2');
    assert.equal(chart['kubeVersion'], '>=1.25.0-0');
    const old = await helm(['template', RELEASE, CHART_DIR, '--kube-version', '1.24.9']);
    assert.notEqual(old.code, 0);
    assert.match(old.stderr, /chart requires kubeVersion: >=1\.25\.0-0 which is incompatible with Kubernetes v1\.24\.9/);
    assert.ok((await renderChart({}, { kubeVersion: '1.25.0' })).length > 0);
  });

  it('renders every scenario into manifests that validate against the Kubernetes 1.28 schemas (no unknown fields)', () => {
    for (const [name, manifests] of rendered) {
      assert.ok(manifests.length >= 9, `${name}: only ${manifests.length} manifests`);
      const problems = manifests.flatMap(schemaProblems);
      assert.deepEqual(problems, [], `${name}:\n${problems.join('\n')}`);
    }
  });

  it('the schema check itself catches wrong types, unknown fields, post-1.28 fields and bad cert-manager shapes', () => {
    const deployment = structuredClone(only(manifestsOf('default'), 'Deployment')) as Obj;
    const spec = at(deployment, 'spec', 'template', 'spec') as Obj;
    (deployment['spec'] as Obj)['replicas'] = 'two';
    ((spec['containers'] as Obj[])[0] as Obj)['readinesProbe'] = {};
    (spec['securityContext'] as Obj)['appArmorProfile'] = { type: 'RuntimeDefault' };
    const problems = schemaProblems(deployment as unknown as Manifest).join('\n');
    assert.match(problems, /\/spec\/replicas: must be integer/);
    assert.match(problems, /\/spec\/template\/spec\/containers\/0\/readinesProbe: unknown field/);
    assert.match(problems, /appArmorProfile: not in Kubernetes 1\.28 \(added in 1\.30\)/);

    const certificate = structuredClone(only(manifestsOf('certManager'), 'Certificate', `${FULLNAME}-tls`)) as Obj;
    (certificate['spec'] as Obj)['isCa'] = true;
    (certificate['spec'] as Obj)['duration'] = '1 year';
    const certProblems = schemaProblems(certificate as unknown as Manifest).join('\n');
    assert.match(certProblems, /\/spec\/isCa: unknown field/);
    assert.match(certProblems, /\/spec\/duration: "1 year" is not a Go duration/);
  });

  it('puts one resource in each template file', () => {
    for (const manifests of rendered.values()) {
      const sources = new Set<string>();
      for (const manifest of manifests) {
        const key = `${manifest.kind}/${manifest.metadata.name}`;
        assert.ok(!sources.has(key), `${key} twice`);
        sources.add(key);
      }
    }
    for (const file of readdirSync(`${CHART_DIR}/templates`).filter((name) => name.endsWith('.yaml'))) {
      const kinds = readFileSync(`${CHART_DIR}/templates/${file}`, 'utf8').match(/^kind: /gm) ?? [];
      assert.equal(kinds.length, 1, `templates/${file} holds ${kinds.length} resources`);
    }
  });

  it('names every object with app.kubernetes.io labels, within 63 characters', () => {
    for (const [name, manifests] of rendered) {
      for (const manifest of manifests) {
        const { labels = {} } = manifest.metadata;
        const where = `${name}: ${manifest.kind}/${manifest.metadata.name}`;
        assert.ok(manifest.metadata.name.length <= 63, `${where}: name longer than 63`);
        for (const key of ['app.kubernetes.io/name', 'app.kubernetes.io/instance', 'app.kubernetes.io/version', 'app.kubernetes.io/managed-by', 'helm.sh/chart']) {
          assert.ok(typeof labels[key] === 'string' && labels[key] !== '', `${where}: no ${key}`);
        }
        for (const [key, value] of Object.entries(labels)) assert.ok(value.length <= 63, `${where}: label ${key} longer than 63`);
        if (manifest.kind !== 'ClusterRole' && manifest.kind !== 'ClusterRoleBinding' && manifest.kind !== 'MutatingWebhookConfiguration') {
          assert.equal(manifest.metadata.namespace, NAMESPACE, `${where}: not in the release namespace`);
        }
      }
    }
    const long = manifestsOf('longNames');
    assert.equal(only(long, 'Deployment').metadata.name, 'a'.repeat(63));
    assert.equal(only(long, 'Deployment').metadata.labels?.['app.kubernetes.io/name'], 'b'.repeat(63));
    assert.equal(envOf(long).get('CERT_SECRET'), `${'a'.repeat(59)}-tls`);
  });

  it('Deployment: 2 replicas spread across nodes, HTTPS probes, restricted securityContext, preStop without a shell', () => {
    const manifests = manifestsOf('default');
    const deployment = only(manifests, 'Deployment');
    assert.equal(at(deployment, 'spec', 'replicas'), 2);
    assert.deepEqual(at(deployment, 'spec', 'strategy', 'rollingUpdate'), { maxUnavailable: 0, maxSurge: 1 });
    const spec = podSpec(manifests);
    const selectorLabels = at(deployment, 'spec', 'selector', 'matchLabels');
    assert.deepEqual(spec['topologySpreadConstraints'], [
      { labelSelector: { matchLabels: selectorLabels }, maxSkew: 1, topologyKey: 'kubernetes.io/hostname', whenUnsatisfiable: 'ScheduleAnyway' },
    ]);
    assert.equal(spec['enableServiceLinks'], false);
    assert.equal(spec['serviceAccountName'], FULLNAME);
    assert.equal(spec['priorityClassName'], undefined);
    assert.deepEqual(spec['securityContext'], { runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532, seccompProfile: { type: 'RuntimeDefault' } });

    const container = injectorContainer(manifests);
    assert.equal(container['image'], 'envoy-injector:0.1.0');
    assert.deepEqual(container['ports'], [{ name: 'https', containerPort: 8443, protocol: 'TCP' }]);
    assert.deepEqual(at(container, 'livenessProbe', 'httpGet'), { scheme: 'HTTPS', path: '/healthz', port: 'https' });
    assert.deepEqual(at(container, 'readinessProbe', 'httpGet'), { scheme: 'HTTPS', path: '/readyz', port: 'https' });
    // The liveness probe waits for a start-up probe of the same check: a slow start is not met with failures, nor restarted before a minute.
    assert.deepEqual(at(container, 'startupProbe'), { httpGet: { scheme: 'HTTPS', path: '/healthz', port: 'https' }, initialDelaySeconds: 2, periodSeconds: 2, failureThreshold: 30, timeoutSeconds: 2 });
    assert.equal(at(container, 'livenessProbe', 'initialDelaySeconds'), undefined, 'the startupProbe holds the liveness probe back');
    assert.deepEqual(container['securityContext'], {
      runAsNonRoot: true,
      runAsUser: 65532,
      runAsGroup: 65532,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      privileged: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    assert.ok(at(container, 'resources', 'requests', 'cpu') !== undefined && at(container, 'resources', 'limits', 'memory') !== undefined);
    // distroless has no sh or sleep: the image's own node waits.
    assert.deepEqual(at(container, 'lifecycle', 'preStop', 'exec', 'command'), ['/nodejs/bin/node', '-e', 'setTimeout(() => {}, 5000)']);
    assert.equal(spec['terminationGracePeriodSeconds'], 30);
    assert.equal(JSON.stringify(deployment).includes('"sh"'), false);

    // Only the auto mode's injector needs no mounted Secret.
    assert.deepEqual(container['volumeMounts'], [{ name: 'tmp', mountPath: '/tmp' }]);
    // The marker label the webhooks' objectSelector keys on.
    assert.equal(at(deployment, 'spec', 'template', 'metadata', 'labels', 'envoy-injector.io/injector'), FULLNAME);
  });

  it('Deployment options: an HPA, priorityClassName, metrics port and scrape annotations, cluster domain', () => {
    const hpaManifests = manifestsOf('hpa');
    const hpa = only(hpaManifests, 'HorizontalPodAutoscaler');
    assert.deepEqual(at(hpa, 'spec', 'scaleTargetRef'), { apiVersion: 'apps/v1', kind: 'Deployment', name: FULLNAME });
    assert.equal(at(hpa, 'spec', 'minReplicas'), 3);
    assert.equal(at(hpa, 'spec', 'maxReplicas'), 7);
    assert.equal(manifestsOf('default').some((manifest) => manifest.kind === 'HorizontalPodAutoscaler'), false);

    const metrics = manifestsOf('metrics');
    assert.equal(podSpec(metrics)['priorityClassName'], 'system-cluster-critical');
    assert.equal(envOf(metrics).get('METRICS_PORT'), '9090');
    assert.equal(envOf(metrics).get('CLUSTER_DOMAIN'), 'k8s.example');
    assert.deepEqual((injectorContainer(metrics)['ports'] as Obj[]).map((port) => port['name']), ['https', 'metrics']);
    assert.deepEqual(at(only(metrics, 'Deployment'), 'spec', 'template', 'metadata', 'annotations'), {
      'prometheus.io/scrape': 'true',
      'prometheus.io/port': '9090',
      'prometheus.io/path': '/metrics',
      team: 'platform',
    });
    assert.equal(envOf(manifestsOf('default')).has('METRICS_PORT'), false);
  });

  it('image digest, extraEnv, a proxy without a fixed uid, a percentage PDB, no preStop', () => {
    const manifests = manifestsOf('options');
    const container = injectorContainer(manifests);
    assert.equal(container['image'], `registry.example.com/envoy-injector@sha256:${'c'.repeat(64)}`);
    assert.equal(envOf(manifests).get('NODE_OPTIONS'), '--max-old-space-size=192');
    assert.equal(container['lifecycle'], undefined);
    assert.equal(at(only(manifests, 'PodDisruptionBudget'), 'spec', 'minAvailable'), '50%');
    const envoy = templatesOf(manifests).defaultTemplate.containers[0] as Obj;
    assert.equal(envoy['image'], 'envoyproxy/envoy:v1.39.5');
    assert.deepEqual(Object.keys(envoy['securityContext'] as Obj).sort(), ['allowPrivilegeEscalation', 'capabilities', 'readOnlyRootFilesystem', 'runAsNonRoot', 'seccompProfile']);
  });

  it('the PDB lets one injector Pod go at a time whatever the replica count; minAvailable instead when set, never forbidding every eviction', async () => {
    for (const values of [{}, { replicaCount: 1 }, { replicaCount: 5 }, { autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 8 } }]) {
      const pdb = only(await renderChart(values), 'PodDisruptionBudget');
      assert.equal(at(pdb, 'spec', 'maxUnavailable'), 1, JSON.stringify(values));
      assert.equal(at(pdb, 'spec', 'minAvailable'), undefined, JSON.stringify(values));
    }
    assert.equal(at(only(await renderChart({ podDisruptionBudget: { maxUnavailable: '25%' } }), 'PodDisruptionBudget'), 'spec', 'maxUnavailable'), '25%');
    assert.equal(at(only(await renderChart({ podDisruptionBudget: { minAvailable: 1 } }), 'PodDisruptionBudget'), 'spec', 'minAvailable'), 1);
    // minAvailable with fewer than two replicas guaranteed would forbid every eviction: one may go instead.
    for (const values of [{ replicaCount: 1, podDisruptionBudget: { minAvailable: 1 } }, { autoscaling: { enabled: true, minReplicas: 1, maxReplicas: 3 }, podDisruptionBudget: { minAvailable: 1 } }, { replicaCount: 1, podDisruptionBudget: { minAvailable: '50%' } }]) {
      const pdb = only(await renderChart(values), 'PodDisruptionBudget');
      assert.deepEqual(at(pdb, 'spec', 'maxUnavailable'), 1, JSON.stringify(values));
      assert.equal(at(pdb, 'spec', 'minAvailable'), undefined, JSON.stringify(values));
    }
    assert.equal(at(only(await renderChart({ autoscaling: { enabled: true, minReplicas: 2, maxReplicas: 3 }, podDisruptionBudget: { minAvailable: 1 } }), 'PodDisruptionBudget'), 'spec', 'minAvailable'), 1);
    assert.deepEqual((await renderChart({ podDisruptionBudget: { enabled: false } })).filter((manifest) => manifest.kind === 'PodDisruptionBudget'), []);
  });

  it('the same release name in two namespaces: cluster-scoped objects do not collide, and every reference follows', async () => {
    const clusterScoped = ['ClusterRole', 'ClusterRoleBinding', 'MutatingWebhookConfiguration'];
    const names = async (namespace: string) => {
      const manifests = await renderChart({ certificates: { mode: 'auto' } }, { namespace });
      const byKind = new Map(manifests.filter((manifest) => clusterScoped.includes(manifest.kind)).map((manifest) => [manifest.kind, manifest.metadata.name]));
      // What points at them: the binding's roleRef, the RBAC rule on the webhook configuration, the injector's setting.
      assert.equal(at(only(manifests, 'ClusterRoleBinding'), 'roleRef', 'name'), byKind.get('ClusterRole'));
      const rules = only(manifests, 'ClusterRole')['rules'] as Obj[];
      assert.ok(rules.some((rule) => (rule['resourceNames'] as string[] | undefined)?.includes(byKind.get('MutatingWebhookConfiguration') ?? '')), 'the ClusterRole names the webhook configuration');
      assert.equal(envOf(manifests).get('WEBHOOK_CONFIG_NAME'), byKind.get('MutatingWebhookConfiguration'));
      for (const name of byKind.values()) assert.ok(name.length <= 63, name);
      return byKind;
    };
    const [a, b] = await Promise.all([names('team-a'), names('team-b')]);
    for (const kind of clusterScoped) assert.notEqual(a.get(kind), b.get(kind), `${kind} names collide`);
    const long = await names('a-namespace-whose-name-is-rather-long-for-this-purpose');
    assert.notEqual(long.get('ClusterRole'), (await names('a-namespace-whose-name-is-rather-long-for-this-purpose-too')).get('ClusterRole'), 'truncation keeps names apart');
  });

  it('autoscaling on: the Deployment keeps a replica count (never dropped to 1 when the HPA is turned on by an upgrade)', () => {
    assert.equal(at(only(manifestsOf('hpa'), 'Deployment'), 'spec', 'replicas'), 3, 'minReplicas when nothing runs yet');
  });

  it('PodDisruptionBudget maxUnavailable 1 on by default; Service 443 → the named port https', () => {
    const manifests = manifestsOf('default');
    const pdb = only(manifests, 'PodDisruptionBudget');
    assert.deepEqual(at(pdb, 'spec'), { maxUnavailable: 1, selector: at(pdb, 'spec', 'selector') });
    assert.deepEqual(at(pdb, 'spec', 'selector', 'matchLabels'), at(only(manifests, 'Deployment'), 'spec', 'selector', 'matchLabels'));
    const service = only(manifests, 'Service');
    assert.deepEqual(at(service, 'spec', 'ports'), [{ name: 'https', port: 443, targetPort: 'https', protocol: 'TCP' }]);
    assert.deepEqual(at(service, 'spec', 'selector'), at(only(manifests, 'Deployment'), 'spec', 'selector', 'matchLabels'));
    assert.equal(only(manifests, 'ServiceAccount').metadata.name, FULLNAME);
  });

  it('sets the injector environment for each certificate mode', () => {
    const common = {
      PORT: '8443',
      HOST: '::',
      LOG_LEVEL: 'info',
      TEMPLATE_CONFIGMAP: 'envoy-initializer',
      NATIVE_SIDECAR: 'auto',
      ALLOWED_OVERRIDES: 'proxy-cpu,proxy-memory,proxy-cpu-limit,proxy-memory-limit',
      // The label envoy_injector_release of every series: what the alerts select.
      METRICS_RELEASE: `${NAMESPACE}/${RELEASE}`,
      SHUTDOWN_DELAY: '2s',
      SHUTDOWN_TIMEOUT: '10s',
      EVENT_QUEUE_SIZE: '1000',
      POD_NAMESPACE: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } },
    };
    const auto = { ...common, CERT_MODE: 'auto', CERT_SECRET: `${FULLNAME}-tls`, WEBHOOK_CONFIG_NAME: CLUSTER_NAME, SERVICE_NAME: FULLNAME, CLUSTER_DOMAIN: 'cluster.local' };
    assert.deepEqual(Object.fromEntries(envOf(manifestsOf('default'))), auto);
    assert.deepEqual(Object.fromEntries(envOf(manifestsOf('auto'))), auto);
    const files = { ...common, CERT_MODE: 'files', TLS_CERT_FILE: '/etc/envoy-injector/tls/tls.crt', TLS_KEY_FILE: '/etc/envoy-injector/tls/tls.key' };
    for (const [scenario, secretName] of [['certManager', `${FULLNAME}-tls`], ['secret', 'my-webhook-tls']] as const) {
      const manifests = manifestsOf(scenario);
      assert.deepEqual(Object.fromEntries(envOf(manifests)), files, scenario);
      assert.deepEqual(injectorContainer(manifests)['volumeMounts'], [
        { name: 'tmp', mountPath: '/tmp' },
        { name: 'tls', mountPath: '/etc/envoy-injector/tls', readOnly: true },
      ]);
      assert.deepEqual((podSpec(manifests)['volumes'] as Obj[])[1], { name: 'tls', secret: { secretName, defaultMode: 0o440 } });
    }
    assert.equal(envOf(manifestsOf('excluded')).get('EXCLUDED_NAMESPACES'), 'legacy,batch-jobs');
  });

  it('MutatingWebhookConfiguration: three webhooks with the selectors and matchConditions of issues 5 and 27', () => {
    const webhooks = webhooksOf(manifestsOf('default'));
    const excluded = ['kube-system', 'kube-public', 'kube-node-lease', NAMESPACE];
    const common = {
      admissionReviewVersions: ['v1'],
      sideEffects: 'None',
      reinvocationPolicy: 'IfNeeded',
      matchPolicy: 'Equivalent',
      timeoutSeconds: 5,
      failurePolicy: 'Fail',
      clientConfig: { service: { name: FULLNAME, namespace: NAMESPACE, path: '/mutate', port: 443 } },
      rules: [{ apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], scope: 'Namespaced' }],
      // The injector's own Pods (other-pods also skips Pods our patch labeled injected, below).
      objectSelector: { matchExpressions: [{ key: 'envoy-injector.io/injector', operator: 'DoesNotExist' }] },
    };
    // opted-in-pods and other-pods: every namespace neither enabled nor disabled.
    const ordinaryNamespaces = {
      matchExpressions: [
        { key: 'envoy-injector.io/inject', operator: 'NotIn', values: ['enabled', 'disabled'] },
        { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: excluded },
      ],
    };
    const notOptedOut = {
      name: 'not-opted-out',
      expression: "!has(object.metadata.annotations) || !('envoy-injector.io/inject' in object.metadata.annotations) || object.metadata.annotations['envoy-injector.io/inject'] != 'false'",
    };
    assert.deepEqual(webhooks, [
      {
        name: `enabled-namespaces.${CLUSTER_NAME}.envoy-injector.io`,
        ...common,
        namespaceSelector: {
          matchExpressions: [
            { key: 'envoy-injector.io/inject', operator: 'In', values: ['enabled'] },
            { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: excluded },
          ],
        },
        matchConditions: [
          notOptedOut,
        ],
      },
      {
        name: `opted-in-pods.${CLUSTER_NAME}.envoy-injector.io`,
        ...common,
        namespaceSelector: ordinaryNamespaces,
        matchConditions: [
          {
            name: 'opted-in',
            expression:
              "has(object.metadata.annotations) && (('envoy-injector.io/inject' in object.metadata.annotations && object.metadata.annotations['envoy-injector.io/inject'] == 'true') || ('initializer.kubernetes.io/envoy' in object.metadata.annotations && object.metadata.annotations['initializer.kubernetes.io/envoy'] == 'true'))",
          },
        ],
      },
      {
        name: `other-pods.${CLUSTER_NAME}.envoy-injector.io`,
        ...common,
        failurePolicy: 'Ignore',
        namespaceSelector: ordinaryNamespaces,
        objectSelector: {
          matchExpressions: [
            { key: 'envoy-injector.io/injector', operator: 'DoesNotExist' },
            { key: 'envoy-injector.io/injected', operator: 'DoesNotExist' },
          ],
        },
        matchConditions: [
          notOptedOut,
          { name: 'not-injected', expression: "!has(object.metadata.annotations) || !('envoy-injector.io/status' in object.metadata.annotations)" },
        ],
      },
    ]);
    // auto mode: no caBundle in the chart (the injector patches it) and no cert-manager annotation.
    assert.equal(only(manifestsOf('default'), 'MutatingWebhookConfiguration').metadata.annotations, undefined);

    const custom = webhooksOf(manifestsOf('excluded'));
    for (const webhook of custom) {
      assert.deepEqual(webhook.namespaceSelector?.matchExpressions?.[1], {
        key: 'kubernetes.io/metadata.name',
        operator: 'NotIn',
        values: [...excluded, 'legacy', 'batch-jobs'],
      });
    }
    // Installed into kube-system, the list holds it once.
    return renderChart({}, { namespace: 'kube-system' }).then((manifests) => {
      for (const webhook of webhooksOf(manifests)) {
        assert.deepEqual(webhook.namespaceSelector?.matchExpressions?.[1]?.values, ['kube-system', 'kube-public', 'kube-node-lease']);
      }
    });
  });

  it('the CEL matchConditions give the intended answer on sample Pods', () => {
    const [enabled, optedIn, other] = webhooksOf(manifestsOf('default')).map((webhook) => webhook.matchConditions?.map((condition) => condition.expression) ?? []);
    const pod = (annotations?: Record<string, string>) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'p', ...(annotations === undefined ? {} : { annotations }) },
      spec: { containers: [{ name: 'app', image: 'nginx' }] },
    });
    const status = { 'envoy-injector.io/status': '{"template":"default"}' };
    // Whether each webhook is called: enabled-namespaces, opted-in-pods, other-pods.
    const cases: [string, ReturnType<typeof pod>, [boolean, boolean, boolean]][] = [
      ['annotated "true"', pod({ 'envoy-injector.io/inject': 'true' }), [true, true, true]],
      ['annotated "false"', pod({ 'envoy-injector.io/inject': 'false' }), [false, false, false]],
      ['the seed annotation', pod({ 'initializer.kubernetes.io/envoy': 'true' }), [true, true, true]],
      ['the seed annotation "false"', pod({ 'initializer.kubernetes.io/envoy': 'false' }), [true, false, true]],
      ['no annotations key at all', pod(), [true, false, true]],
      ['other annotations only', pod({ 'prometheus.io/scrape': 'true' }), [true, false, true]],
      ['an unusable value', pod({ 'envoy-injector.io/inject': 'yes' }), [true, false, true]],
      ['injected already (our status annotation)', pod({ 'envoy-injector.io/inject': 'true', ...status }), [true, true, false]],
      ['injected already, not annotated', pod(status), [true, false, false]],
    ];
    const all = (expressions: readonly string[] | undefined, sample: unknown): boolean => (expressions ?? []).every((expression) => evaluateCondition(expression, sample));
    for (const [what, sample, expected] of cases) {
      assert.deepEqual([all(enabled, sample), all(optedIn, sample), all(other, sample)], expected, what);
    }
  });

  it('the webhooks never filter out a Pod the injector would inject, inject it in one call (the status annotation keeps the later webhooks off), and never see an injector Pod', async () => {
    const templates = templatesOf(manifestsOf('default'));
    const selectorOptions = {
      neverInjectSelectors: parseLabelSelectors(CHART_SELECTORS.never).selectors,
      alwaysInjectSelectors: parseLabelSelectors(CHART_SELECTORS.always).selectors,
    };
    for (const scenario of ['default', 'noMatchConditions', 'noLaterOptIn', 'excluded', 'selectors']) {
      const webhooks = webhooksOf(manifestsOf(scenario));
      const namespaces: [string, Record<string, string>][] = [
        ['apps', { 'envoy-injector.io/inject': 'enabled' }],
        ['plain', {}],
        ['off', { 'envoy-injector.io/inject': 'disabled' }],
        ['kube-system', { 'envoy-injector.io/inject': 'enabled' }],
        [NAMESPACE, { 'envoy-injector.io/inject': 'enabled' }],
        ['legacy', { 'envoy-injector.io/inject': 'enabled' }],
      ];
      const annotationSets: (Record<string, string> | undefined)[] = [
        undefined,
        { 'envoy-injector.io/inject': 'true' },
        { 'envoy-injector.io/inject': 'false' },
        { 'initializer.kubernetes.io/envoy': 'true' },
        { 'envoy-injector.io/inject': 'maybe' },
      ];
      for (const [namespace, labels] of namespaces) {
        const namespaceLabels = { ...labels, 'kubernetes.io/metadata.name': namespace };
        for (const annotations of annotationSets) {
          for (const [injectorPod, podLabels] of [
            [false, { app: 'web' }],
            [true, { 'envoy-injector.io/injector': 'any-release' }],
            [false, { app: 'etcd', mesh: 'member' }],
            [false, { mesh: 'member', tier: 'web' }],
            [false, { mesh: 'member', tier: 'batch' }],
            [false, { 'always.example.com/on': '' }],
          ] as const) {
            const pod = {
              apiVersion: 'v1',
              kind: 'Pod',
              metadata: {
                generateName: 'p-',
                labels: podLabels,
                ...(annotations === undefined ? {} : { annotations }),
              },
              spec: { containers: [{ name: 'app', image: 'nginx' }] },
            } as JsonObject;
            const decision = decideInjection({
              operation: 'CREATE',
              kind: { group: '', kind: 'Pod' },
              namespace,
              namespaceLabels,
              pod,
              templates,
              options: { excludedNamespaces: scenario === 'excluded' ? ['legacy', 'batch-jobs'] : [], injectorNamespace: NAMESPACE, ...(scenario === 'selectors' ? selectorOptions : {}) },
            });
            // The first call that injects leaves the status annotation and the injected label, which the webhooks after it see.
            const injected = (candidate: JsonObject): JsonObject => {
              const metadata = candidate['metadata'] as JsonObject;
              return {
                ...candidate,
                metadata: {
                  ...metadata,
                  annotations: { ...(metadata['annotations'] as JsonObject | undefined), 'envoy-injector.io/status': '{}' },
                  labels: { ...(metadata['labels'] as JsonObject | undefined), [InjectedLabel.key]: InjectedLabel.value },
                },
              };
            };
            const called = webhooksCalled(webhooks, namespaceLabels, pod, (_name, seen) => (decision.inject && !injectorPod ? injected(seen) : seen));
            const where = `${scenario}: namespace ${namespace} ${JSON.stringify(labels)}, annotations ${JSON.stringify(annotations)}, labels ${JSON.stringify(podLabels)}`;
            // At most opted-in-pods then other-pods, for a Pod opted in and skipped; an injected Pod costs one call.
            assert.ok(called.length <= (decision.inject ? 1 : 2), `${where}: called ${called.join(', ')}`);
            if (injectorPod) {
              assert.deepEqual(called, [], where);
              continue;
            }
            if (decision.inject) assert.equal(called.length, 1, `${where}: the injector would inject, but no webhook is called`);
            // The API server's rerun of the chain after our patch: only the webhook that injected the Pod matches it (reinvoked
            // when a later webhook changed it, to restore the order of init containers); other-pods skips it by its label.
            if (decision.inject) assert.deepEqual(webhooksCalled(webhooks, namespaceLabels, injected(pod)), called, `${where}: the injected Pod in the rerun`);
            if (['kube-system', NAMESPACE].includes(namespace) || (scenario === 'excluded' && namespace === 'legacy')) assert.deepEqual(called, [], where);
            if (namespace === 'off') assert.deepEqual(called, [], where);
          }
        }
      }
    }
  });

  it('central selectors (issue 28): passed as JSON in env, read back as the injector reads them; the schema refuses bad ones', async () => {
    const deployment = only(manifestsOf('selectors'), 'Deployment');
    const container = ((((deployment['spec'] as Obj)['template'] as Obj)['spec'] as Obj)['containers'] as Obj[])[0] ?? {};
    const env = new Map(((container['env'] as Obj[] | undefined) ?? []).map((entry) => [entry['name'], entry['value']]));
    assert.deepEqual(parseSelectorsOption('NEVER_INJECT_SELECTOR', String(env.get('NEVER_INJECT_SELECTOR'))), parseLabelSelectors(CHART_SELECTORS.never).selectors);
    assert.deepEqual(parseSelectorsOption('ALWAYS_INJECT_SELECTOR', String(env.get('ALWAYS_INJECT_SELECTOR'))), parseLabelSelectors(CHART_SELECTORS.always).selectors);
    const plain = only(manifestsOf('default'), 'Deployment');
    assert.ok(!JSON.stringify(plain).includes('INJECT_SELECTOR'), 'no selector env without selectors');
    const bad: unknown[] = [
      [{}],
      [{ matchLabels: { 'bad key': 'x' } }],
      [{ matchLabels: { app: "it's" } }],
      [{ matchExpressions: [{ key: 'a', operator: 'In' }] }],
      [{ matchExpressions: [{ key: 'a', operator: 'Equals', values: ['x'] }] }],
      [{ matchExpressions: [{ key: 'a', operator: 'Exists', values: ['x'] }] }],
      [{ matchLabel: { a: 'b' } }],
    ];
    for (const selectors of bad) {
      const result = await helm(['template', RELEASE, CHART_DIR, '--namespace', NAMESPACE, ...(await valuesArgs({ alwaysInjectSelector: selectors }))]);
      assert.notEqual(result.code, 0, `the schema lets ${JSON.stringify(selectors)} through`);
    }
  });

  it('nativeSidecar on or off: no access to Nodes', async () => {
    for (const nativeSidecar of ['on', 'off']) {
      const rules = only(await renderChart({ nativeSidecar }), 'ClusterRole')['rules'] as Obj[];
      assert.ok(!JSON.stringify(rules).includes('nodes'), nativeSidecar);
    }
  });

  it('matchConditions off: no CEL, and the webhook for ordinary namespaces uses failurePolicy Ignore', () => {
    const webhooks = webhooksOf(manifestsOf('noMatchConditions'));
    assert.deepEqual(
      webhooks.map((webhook) => [webhook.name, webhook.failurePolicy, webhook.matchConditions]),
      [
        [`enabled-namespaces.${CLUSTER_NAME}.envoy-injector.io`, 'Fail', undefined],
        [`opted-in-pods.${CLUSTER_NAME}.envoy-injector.io`, 'Ignore', undefined],
        [`other-pods.${CLUSTER_NAME}.envoy-injector.io`, 'Ignore', undefined],
      ],
    );
    // It then sees every Pod of an ordinary namespace, and the injector decides.
    assert.deepEqual(webhooksCalled(webhooks, { 'kubernetes.io/metadata.name': 'plain' }, { metadata: {} }), [`opted-in-pods.${CLUSTER_NAME}.envoy-injector.io`]);
  });

  it('other-pods (issue 27): failurePolicy Ignore whatever webhook.failurePolicy says; with laterOptIn or matchConditions off it is kept but matches no Pod', () => {
    const policies = (scenario: string) => webhooksOf(manifestsOf(scenario)).map((webhook) => [webhook.name, webhook.failurePolicy]);
    const names = [`enabled-namespaces.${CLUSTER_NAME}.envoy-injector.io`, `opted-in-pods.${CLUSTER_NAME}.envoy-injector.io`, `other-pods.${CLUSTER_NAME}.envoy-injector.io`];
    assert.deepEqual(policies('default'), [[names[0], 'Fail'], [names[1], 'Fail'], [names[2], 'Ignore']]);
    assert.deepEqual(policies('failOpen'), [[names[0], 'Ignore'], [names[1], 'Ignore'], [names[2], 'Ignore']]);
    // Kept, so that an upgrade turning it off removes no webhook whose caBundle the injector co-owns (server-side apply).
    for (const scenario of ['noLaterOptIn', 'noMatchConditions']) assert.deepEqual(policies(scenario).map(([name]) => name), names, scenario);
    const plain = { 'kubernetes.io/metadata.name': 'plain' };
    const samples = [{ metadata: {} }, { metadata: { labels: { 'envoy-injector.io/injector': 'x' } } }, { metadata: { annotations: { 'envoy-injector.io/inject': 'true' } } }];
    // An ordinary Pod reaches other-pods alone; turned off, it matches no Pod (its objectSelector asks for the marker label both absent and present).
    assert.deepEqual(webhooksCalled(webhooksOf(manifestsOf('default')), plain, { metadata: {} }), [names[2]]);
    for (const scenario of ['noLaterOptIn', 'noMatchConditions']) {
      const other = webhooksOf(manifestsOf(scenario)).filter((webhook) => webhook.name === names[2]);
      for (const sample of samples) assert.deepEqual(webhooksCalled(other, plain, sample), [], `${scenario}: ${JSON.stringify(sample)}`);
    }
    assert.deepEqual(webhooksCalled(webhooksOf(manifestsOf('noLaterOptIn')), plain, { metadata: {} }), []);
  });


  it('RBAC grants exactly what the injector needs, per certificate mode', () => {
    const configMapRule = { apiGroups: [''], resources: ['configmaps'], resourceNames: ['envoy-initializer'], verbs: ['get', 'list', 'watch'] };
    const namespacesRule = { apiGroups: [''], resources: ['namespaces'], verbs: ['get', 'list', 'watch'] };
    // nativeSidecar auto (the default): kubelet versions, read-only.
    const nodesRule = { apiGroups: [''], resources: ['nodes'], verbs: ['get', 'list', 'watch'] };
    // Warning Events on workloads (events.queueSize > 0, the default): written, never read; the owners they go on, read one by one.
    const eventRules = [
      { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create', 'patch'] },
      { apiGroups: ['apps'], resources: ['replicasets'], verbs: ['get'] },
      { apiGroups: ['batch'], resources: ['jobs'], verbs: ['get'] },
    ];
    const expected = {
      auto: {
        role: [
          configMapRule,
          { apiGroups: [''], resources: ['secrets'], verbs: ['create'] },
          // Read, watched, replaced whole (certificate-secret.ts): never patched.
          { apiGroups: [''], resources: ['secrets'], resourceNames: [`${FULLNAME}-tls`], verbs: ['get', 'list', 'watch', 'update'] },
        ],
        clusterRole: [
          namespacesRule,
          nodesRule,
          ...eventRules,
          // Read, watched, its caBundle applied (a PATCH, ca-bundle-patcher.ts): never replaced.
          { apiGroups: ['admissionregistration.k8s.io'], resources: ['mutatingwebhookconfigurations'], resourceNames: [CLUSTER_NAME], verbs: ['get', 'list', 'watch', 'patch'] },
        ],
      },
      files: { role: [configMapRule], clusterRole: [namespacesRule, nodesRule, ...eventRules] },
    };
    for (const scenario of ['default', 'auto', 'certManager', 'secret', 'customTemplate']) {
      const manifests = manifestsOf(scenario);
      const want = scenario === 'certManager' || scenario === 'secret' ? expected.files : expected.auto;
      const role = only(manifests, 'Role');
      const clusterRole = only(manifests, 'ClusterRole');
      assert.deepEqual(role['rules'], want.role, `${scenario}: Role`);
      assert.deepEqual(clusterRole['rules'], want.clusterRole, `${scenario}: ClusterRole`);

      const everything = JSON.stringify([role['rules'], clusterRole['rules']]);
      assert.equal(everything.includes('"*"'), false, `${scenario}: a wildcard`);
      assert.equal(JSON.stringify(clusterRole['rules']).includes('secrets'), false, `${scenario}: cluster-wide Secret access`);
      for (const rule of [...(role['rules'] as Obj[]), ...(clusterRole['rules'] as Obj[])]) {
        const verbs = rule['verbs'] as string[];
        // Namespaces and Nodes are read whole; Events and the owners they go on are in any namespace, their names unknown in advance.
        const nameable = (rule['resources'] as string[]).some((resource) => !['namespaces', 'nodes', 'events', 'replicasets', 'jobs'].includes(resource));
        // create cannot be limited by resourceNames; every other verb on a named object must be.
        if (nameable && !(verbs.length === 1 && verbs[0] === 'create')) assert.ok(Array.isArray(rule['resourceNames']), `${scenario}: ${JSON.stringify(rule)}`);
      }
      const serviceAccount = [{ kind: 'ServiceAccount', name: FULLNAME, namespace: NAMESPACE }];
      assert.deepEqual(only(manifests, 'RoleBinding')['subjects'], serviceAccount);
      assert.deepEqual(only(manifests, 'ClusterRoleBinding')['subjects'], serviceAccount);
      assert.deepEqual(only(manifests, 'RoleBinding')['roleRef'], { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: FULLNAME });
      assert.deepEqual(only(manifests, 'ClusterRoleBinding')['roleRef'], { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: CLUSTER_NAME });
    }
  });

  it('events.queueSize=0: no Events, and no permission for them', async () => {
    const manifests = await renderChart({ events: { queueSize: 0 } });
    assert.equal(JSON.stringify(only(manifests, 'ClusterRole')['rules']).includes('events'), false);
    assert.equal(JSON.stringify(only(manifests, 'ClusterRole')['rules']).includes('replicasets'), false);
    const env = ((only(manifests, 'Deployment')['spec'] as Obj)['template'] as { spec: { containers: { env: { name: string; value?: string }[] }[] } }).spec.containers[0]?.env ?? [];
    assert.deepEqual(env.find((variable) => variable.name === 'EVENT_QUEUE_SIZE'), { name: 'EVENT_QUEUE_SIZE', value: '0' });
  });

  it('certificates.mode=certManager: a self-signed CA chain, a serving Certificate for the Service, inject-ca-from', () => {
    const manifests = manifestsOf('certManager');
    const kinds = manifests.filter((manifest) => manifest.apiVersion === 'cert-manager.io/v1').map((manifest) => `${manifest.kind}/${manifest.metadata.name}`);
    assert.deepEqual(kinds.sort(), [`Certificate/${FULLNAME}-ca`, `Certificate/${FULLNAME}-tls`, `Issuer/${FULLNAME}-ca`, `Issuer/${FULLNAME}-selfsigned`]);
    assert.deepEqual(at(only(manifests, 'Issuer', `${FULLNAME}-selfsigned`), 'spec'), { selfSigned: {} });
    const ca = only(manifests, 'Certificate', `${FULLNAME}-ca`);
    assert.equal(at(ca, 'spec', 'isCA'), true);
    assert.deepEqual(at(ca, 'spec', 'issuerRef'), { group: 'cert-manager.io', kind: 'Issuer', name: `${FULLNAME}-selfsigned` });
    assert.deepEqual(at(only(manifests, 'Issuer', `${FULLNAME}-ca`), 'spec'), { ca: { secretName: at(ca, 'spec', 'secretName') } });
    const serving = only(manifests, 'Certificate', `${FULLNAME}-tls`);
    assert.deepEqual(at(serving, 'spec', 'dnsNames'), [`${FULLNAME}.${NAMESPACE}.svc`, `${FULLNAME}.${NAMESPACE}.svc.cluster.local`]);
    assert.equal(at(serving, 'spec', 'secretName'), `${FULLNAME}-tls`);
    assert.deepEqual(at(serving, 'spec', 'issuerRef'), { group: 'cert-manager.io', kind: 'Issuer', name: `${FULLNAME}-ca` });
    assert.ok((at(serving, 'spec', 'usages') as string[]).includes('server auth'));
    const config = only(manifests, 'MutatingWebhookConfiguration');
    assert.deepEqual(config.metadata.annotations, { 'cert-manager.io/inject-ca-from': `${NAMESPACE}/${FULLNAME}-tls` });
    for (const webhook of webhooksOf(manifests)) assert.equal(at(webhook, 'clientConfig', 'caBundle'), undefined);
    assert.equal(manifestsOf('default').some((manifest) => manifest.apiVersion === 'cert-manager.io/v1'), false);
  });

  it('certificates.mode=secret: the given Secret is mounted and caBundle carries its CA (PEM or base64)', () => {
    for (const scenario of ['secret', 'secretBase64']) {
      for (const webhook of webhooksOf(manifestsOf(scenario))) {
        const bundle = Buffer.from(at(webhook, 'clientConfig', 'caBundle') as string, 'base64').toString('utf8');
        assert.equal(bundle.trim(), caPem.trim(), scenario);
        assert.ok(new X509Certificate(bundle).ca);
      }
      assert.equal(only(manifestsOf(scenario), 'MutatingWebhookConfiguration').metadata.annotations, undefined);
    }
  });

  it('the default sidecar template loads, is self-contained, and injects a runnable Envoy', () => {
    const manifests = manifestsOf('default');
    const configMap = only(manifests, 'ConfigMap');
    assert.equal(configMap.metadata.name, 'envoy-initializer');
    assert.deepEqual(Object.keys(configMap['data'] as Obj), ['config']);
    const templates = templatesOf(manifests);
    const template = templates.defaultTemplate;
    assert.deepEqual(template.volumes, []);
    assert.equal(template.containers.length, 1);
    const envoy = template.containers[0] as Obj;
    assert.match(envoy['image'] as string, /^envoyproxy\/envoy:v1\.\d+\.\d+$/);
    assert.deepEqual(envoy['command'], ['/usr/local/bin/envoy']);
    assert.equal(envoy['volumeMounts'], undefined);
    const args = envoy['args'] as string[];
    // One argument per word: the seed's "--concurrency 4" in one string is what not to do.
    for (const arg of args.filter((entry) => entry.startsWith('--'))) assert.doesNotMatch(arg, /\s/);
    assert.deepEqual(args.slice(2), ['--disable-hot-restart', '--concurrency', '2', '--log-level', 'warning', '--drain-time-s', '5', '--drain-strategy', 'immediate']);
    assert.deepEqual(template.proxyLifecycle, { holdApplication: true, adminPort: 9901, readyPort: 9902, readyPath: '/ready', drainSeconds: 5, startupSeconds: 60 });
    assert.equal(template.safeToEvictLocalVolumes, true);
    assert.equal(args[0], '--config-yaml');
    const bootstrap = parseYaml(args[1] as string) as Obj;
    assert.deepEqual(at(bootstrap, 'admin', 'address', 'socket_address'), { address: '127.0.0.1', port_value: 9901 });
    const listener = (at(bootstrap, 'static_resources', 'listeners') as Obj[])[0] as Obj;
    assert.deepEqual(at(listener, 'address', 'socket_address'), { address: '::', port_value: 9902, ipv4_compat: true });
    const manager = at(listener, 'filter_chains', 0, 'filters', 0) as Obj;
    assert.equal(manager['name'], 'envoy.filters.network.http_connection_manager');
    const routes = at(manager, 'typed_config', 'route_config', 'virtual_hosts', 0, 'routes') as Obj[];
    assert.equal(at(routes[0], 'match', 'path'), '/ready');
    assert.equal(at(routes[0], 'route', 'cluster'), 'admin');
    const admin = (at(bootstrap, 'static_resources', 'clusters') as Obj[])[0] as Obj;
    assert.deepEqual(at(admin, 'load_assignment', 'endpoints', 0, 'lb_endpoints', 0, 'endpoint', 'address', 'socket_address'), { address: '127.0.0.1', port_value: 9901 });
    // The readiness probe reaches Envoy's /ready through the health listener (admin stays on loopback).
    assert.deepEqual(at(envoy, 'readinessProbe', 'httpGet'), { path: '/ready', port: 9902 });
    assert.deepEqual(envoy['ports'], [{ name: 'envoy-health', containerPort: 9902, protocol: 'TCP' }]);
    assert.deepEqual(envoy['securityContext'], {
      runAsNonRoot: true,
      runAsUser: 1337,
      runAsGroup: 1337,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    assert.deepEqual(envoy['resources'], { requests: { cpu: '50m', memory: '64Mi' }, limits: { cpu: '500m', memory: '256Mi' } });

    // Injected into the seed's Pod, the result is a valid 1.28 Pod.
    const injected = applyPodPatch(seedPod(), injectPod(seedPod(), template, { nativeSidecar: false }).patch);
    assert.deepEqual(((injected['spec'] as Obj)['containers'] as Obj[]).map((container) => container['name']), ['myapp-container', 'envoy']);
    const pod = injected as unknown as Manifest;
    assert.deepEqual(schemaProblems(pod), []);
    // Through admitPod, as the webhook injects it: classic first with its hooks, native with its startupProbe; both valid 1.28 Pods.
    const admit = (nativeSidecar: boolean): Obj => {
      const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: {}, pod: seedPod(), templates, options: { nativeSidecar, offline: true } });
      return applyPodPatch(seedPod(), admission.injection?.patch ?? []) as Obj;
    };
    const classic = admit(false);
    const classicEnvoy = ((classic['spec'] as Obj)['containers'] as Obj[])[0] as Obj;
    assert.equal(classicEnvoy['name'], 'envoy');
    assert.deepEqual(Object.keys(classicEnvoy['lifecycle'] as Obj), ['postStart', 'preStop']);
    assert.deepEqual(schemaProblems(classic as unknown as Manifest), []);
    const native = admit(true);
    const nativeEnvoy = ((native['spec'] as Obj)['initContainers'] as Obj[])[0] as Obj;
    assert.deepEqual(nativeEnvoy['startupProbe'], { httpGet: { path: '/ready', port: 9902 }, periodSeconds: 1, failureThreshold: 60 });
    assert.deepEqual(schemaProblems(native as unknown as Manifest), []);
  });

  it('the health listener answers the probe on IPv4 and IPv6 ("::" with ipv4_compat) by default, IPv4 only with 0.0.0.0; probe, containerPort and listener agree', () => {
    const expected: [string, Obj][] = [
      ['default', { address: '::', port_value: 9902, ipv4_compat: true }],
      ['proxyIpv4Only', { address: '0.0.0.0', port_value: 15021 }],
    ];
    for (const [scenario, socketAddress] of expected) {
      const { envoy, bootstrap } = defaultEnvoy(manifestsOf(scenario));
      const listeners = at(bootstrap, 'static_resources', 'listeners') as Obj[];
      assert.deepEqual(listeners.map((listener) => listener['name']), ['health', 'outbound', 'inbound'], scenario);
      assert.deepEqual(at(listeners[0], 'address', 'socket_address'), socketAddress, scenario);
      const port = socketAddress['port_value'];
      assert.deepEqual(envoy['ports'], [{ name: 'envoy-health', containerPort: port, protocol: 'TCP' }], scenario);
      assert.deepEqual(at(envoy, 'readinessProbe', 'httpGet'), { path: '/ready', port }, scenario);
      // The admin API can stop Envoy: loopback only, whatever the listener's address.
      assert.deepEqual(at(bootstrap, 'admin', 'address', 'socket_address'), { address: '127.0.0.1', port_value: 9901 }, scenario);
    }
  });

  it('the bootstrap passes the bootstrap check: capture listeners on the rules\' ports, every cluster defined and used, no port twice', () => {
    for (const scenario of ['default', 'capture', 'proxyIpv4Only', 'options']) {
      const { envoy, bootstrap } = defaultEnvoy(manifestsOf(scenario));
      const { capture, proxyLifecycle } = templatesOf(manifestsOf(scenario)).defaultTemplate;
      assert.ok(proxyLifecycle !== undefined, scenario);
      assert.deepEqual(bootstrapProblems({ bootstrap, container: envoy, capture, lifecycle: proxyLifecycle }), [], scenario);
      // The check has teeth here too: a startupProbe or hook aimed elsewhere is found.
      assert.deepEqual(bootstrapProblems({ bootstrap, container: envoy, capture, lifecycle: { ...proxyLifecycle, adminPort: 1, readyPath: '/healthz' } }), [
        `proxyLifecycle.adminPort 1 is not the admin port ${proxyLifecycle.adminPort}`,
        'the health listener does not route /healthz to the admin cluster',
      ], scenario);
    }
    // The check has teeth: a listener moved off the rules' port, and a cluster misspelt, are found.
    const { envoy, bootstrap } = defaultEnvoy(manifestsOf('capture'));
    const capture = templatesOf(manifestsOf('capture')).defaultTemplate.capture;
    assert.ok(capture !== undefined);
    assert.deepEqual(bootstrapProblems({ bootstrap, container: envoy, capture: { ...capture, outboundPort: 15001 } }), [
      "capture.outboundPort 15001 is not the original_dst listener's port 16001",
    ]);
    const broken = JSON.parse(JSON.stringify(bootstrap).replace('"cluster":"inbound_passthrough"', '"cluster":"inbound_passthru"').replace('"use_original_dst":true', '"use_original_dest":true')) as Obj;
    const problems = bootstrapProblems({ bootstrap: broken, container: envoy, capture });
    assert.ok(problems.includes('listeners[2].use_original_dest: not a field of listener'), problems.join('\n'));
    assert.ok(problems.includes('cluster "inbound_passthru" is used but not defined'), problems.join('\n'));
  });

  it('traffic capture from values: the template\'s capture section, the envoy-init image and the two listeners on the same ports', () => {
    const capture = templatesOf(manifestsOf('capture')).defaultTemplate.capture;
    assert.deepEqual(capture, {
      image: 'registry.example.com/envoy-injector-init:0.1.0',
      mode: 'initContainer',
      checkImage: undefined,
      imagePullPolicy: 'IfNotPresent',
      proxyUid: 1337,
      outboundPort: 16001,
      inboundPort: 16006,
      proxyPorts: [15000, 9902, 15020],
      enabled: true,
      defaults: { excludeOutboundCidrs: '169.254.169.254/32,fd00:ec2::254/128', excludeOutboundPorts: '5432', excludeInboundPorts: '15090,15091', includeInboundPorts: '' },
      resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
      tcpProbes: { port: 15020, address: '::' },
      inboundHandoff: true,
      interception: 'redirect',
      tproxyPort: 15007,
      allowTproxy: false,
    });
    // Off by default, with the chart's own init image at its appVersion.
    const byDefault = templatesOf(manifestsOf('default')).defaultTemplate.capture;
    assert.equal(byDefault?.enabled, false);
    assert.equal(byDefault?.image, 'envoy-injector-init:0.1.0');
    // CNI mode: the check runs from the injector's own image.
    const cni = templatesOf(manifestsOf('captureCni')).defaultTemplate.capture;
    assert.deepEqual([cni?.mode, cni?.checkImage], ['cni', 'registry.example.com/envoy-injector:0.2.0']);
    const { bootstrap } = defaultEnvoy(manifestsOf('capture'));
    const listeners = at(bootstrap, 'static_resources', 'listeners') as Obj[];
    assert.deepEqual(at(listeners[1], 'address', 'socket_address'), { address: '0.0.0.0', port_value: 16001 });
    assert.deepEqual(at(listeners[1], 'additional_addresses', 0, 'address', 'socket_address'), { address: '::', port_value: 16001 });
    // Inbound hands off by original destination (the PROXY protocol's listeners), outbound does not.
    assert.equal(at(listeners[1], 'listener_filters', 0, 'name'), 'envoy.filters.listener.original_dst');
    assert.equal(at(listeners[1], 'use_original_dst'), undefined);
    assert.equal(at(listeners[2], 'use_original_dst'), true);
    // Nodes without IPv6: one IPv4 socket each.
    const ipv4 = at(defaultEnvoy(manifestsOf('proxyIpv4Only')).bootstrap, 'static_resources', 'listeners') as Obj[];
    assert.equal(at(ipv4[1], 'additional_addresses'), undefined);
    // Without a known proxy uid (runAsUser null) the template cannot capture: no section, no listeners.
    assert.equal(templatesOf(manifestsOf('options')).defaultTemplate.capture, undefined);
    assert.deepEqual((at(defaultEnvoy(manifestsOf('options')).bootstrap, 'static_resources', 'listeners') as Obj[]).map((listener) => listener['name']), ['health']);
  });

  it('a custom default template and named templates are rendered from values', () => {
    const manifests = manifestsOf('customTemplate');
    const data = only(manifests, 'ConfigMap')['data'] as Record<string, string>;
    assert.equal(data['config'], CUSTOM_TEMPLATE);
    const templates = templatesOf(manifests);
    assert.deepEqual([...templates.templates.keys()].sort(), ['config', 'debug']);
    assert.equal((templates.defaultTemplate.containers[0] as Obj)['image'], 'registry.example.com/proxy:2.1.0');
    assert.deepEqual(templates.templates.get('debug')?.containers, [{ name: 'debug', image: 'busybox:1.37', command: ['sleep', 'infinity'] }]);
  });

  it('values.schema.json rejects wrong types, unknown keys and bad names, with helm saying where', async () => {
    const wrong: [string, Record<string, unknown>, RegExp][] = [
      ['a string replica count', { replicaCount: 'two' }, /at '\/replicaCount': got string, want integer/],
      ['an unknown top-level key', { replicas: 3 }, /additional properties 'replicas' not allowed/],
      ['a bad certificates.mode', { certificates: { mode: 'vault' } }, /at '\/certificates\/mode': value must be one of 'auto', 'certManager', 'secret'/],
      ['a bad failurePolicy', { webhook: { failurePolicy: 'Sometimes' } }, /at '\/webhook\/failurePolicy': value must be one of 'Fail', 'Ignore'/],
      ['timeoutSeconds above 30', { webhook: { timeoutSeconds: 60 } }, /at '\/webhook\/timeoutSeconds': maximum: got 60, want 30/],
      ['matchConditions as a string', { webhook: { matchConditions: 'no' } }, /at '\/webhook\/matchConditions': got string, want boolean/],
      ['an unknown nested key', { certificates: { mode: 'auto', mdoe: 'secret' } }, /additional properties 'mdoe' not allowed/],
      ['a namespace that is no DNS label', { excludedNamespaces: ['Team_A'] }, /at '\/excludedNamespaces\/0': 'Team_A' does not match pattern/],
      ['an unknown override', { allowedOverrides: ['proxy-env'] }, /at '\/allowedOverrides\/0': value must be one of/],
      ['a bad nativeSidecar', { nativeSidecar: true }, /at '\/nativeSidecar': got boolean, want string/],
      ['a bad proxy.capture.mode', { proxy: { capture: { mode: 'sidecar' } } }, /at '\/proxy\/capture\/mode': value must be one of 'initContainer', 'cni', 'auto'/],
      ['secret mode without a Secret', { certificates: { mode: 'secret' } }, /at '\/certificates\/secretName': minLength: got 0, want 1/],
      ['a proxy.listenAddress that is no wildcard', { proxy: { listenAddress: '10.0.0.7' } }, /at '\/proxy\/listenAddress': value must be one of '::', '0.0.0.0'/],
      ['a duration without unit', { certificates: { certManager: { duration: '365d' } } }, /at '\/certificates\/certManager\/duration': '365d' does not match pattern/],
      ['a budget that forbids every eviction', { podDisruptionBudget: { maxUnavailable: 0 } }, /at '\/podDisruptionBudget\/maxUnavailable': minimum: got 0, want 1/],
      ['a budget of 0 %', { podDisruptionBudget: { maxUnavailable: '0%' } }, /at '\/podDisruptionBudget\/maxUnavailable': '0%' does not match pattern/],
    ];
    const results = await Promise.all(
      wrong.map(async ([what, values, message]) => ({
        what,
        message,
        template: await helm(['template', RELEASE, CHART_DIR, '--kube-version', KUBE_VERSION, ...(await valuesArgs(values))]),
        lint: await helm(['lint', '--strict', CHART_DIR, ...(await valuesArgs(values))]),
      })),
    );
    for (const { what, message, template, lint } of results) {
      assert.notEqual(template.code, 0, `${what}: helm template accepted it`);
      assert.match(template.stderr, /values don't meet the specifications of the schema/, what);
      assert.match(template.stderr, message, `${what}: ${template.stderr}`);
      assert.notEqual(lint.code, 0, `${what}: helm lint accepted it`);
    }
    // --set goes through the same schema.
    const set = await helm(['template', RELEASE, CHART_DIR, '--set', 'certificates.mode=letsencrypt']);
    assert.notEqual(set.code, 0);
    assert.match(set.stderr, /at '\/certificates\/mode': value must be one of/);
  });

  it('documents every value: a schema entry, a `# --` comment in values.yaml and so a row of the values reference', () => {
    const schema = JSON.parse(readFileSync(`${CHART_DIR}/values.schema.json`, 'utf8')) as Obj;
    const values = parseYaml(readFileSync(`${CHART_DIR}/values.yaml`, 'utf8')) as Obj;
    // A value is a schema property that is not itself a closed object of values.
    const leaves: string[] = [];
    const walk = (node: Obj, prefix: string): void => {
      for (const [key, property] of Object.entries((node['properties'] ?? {}) as Record<string, Obj>)) {
        const path = prefix === '' ? key : `${prefix}.${key}`;
        if (property['properties'] !== undefined && property['additionalProperties'] === false) walk(property, path);
        else if (path !== 'global') leaves.push(path);
      }
    };
    walk(schema, '');
    assert.ok(leaves.length > 60, `only ${leaves.length} values`);
    for (const path of leaves) assert.notEqual(at(values, ...path.split('.')), undefined, `${path}: in the schema, not in values.yaml`);

    // The reference (the chart README's table, test/docs-references.test.ts) has one row per `# --` comment.
    const rows = valueRows().map((row) => row.path);
    assert.deepEqual(rows.filter((row) => !leaves.includes(row)), [], 'values.yaml documents with `# --` what the schema has no value for');
    assert.deepEqual(leaves.filter((path) => !rows.includes(path)), [], 'values without a `# --` comment of their own in values.yaml');
  });

  it('secret mode fails with a clear message without its caBundle', async () => {
    const result = await helm(['template', RELEASE, CHART_DIR, ...(await valuesArgs({ certificates: { mode: 'secret', secretName: 'x', caBundle: '' } }))]);
    assert.notEqual(result.code, 0);
    assert.match(result.stderr, /caBundle/);
  });

  it('NOTES.txt tells how to label a namespace, check an injection, and that mounted ConfigMaps must exist everywhere', async () => {
    const result = await helm(['install', RELEASE, CHART_DIR, '--dry-run=client', '--namespace', NAMESPACE]);
    assert.equal(result.code, 0, result.stderr);
    const notes = result.stdout.slice(result.stdout.indexOf('NOTES:'));
    assert.match(notes, /kubectl label namespace my-namespace envoy-injector\.io\/inject=enabled/);
    assert.match(notes, /envoy-injector\.io\/status/);
    assert.match(notes, /mounts a ConfigMap or Secret needs\s+that object in EVERY injected namespace/);
    assert.match(notes, new RegExp(`kubectl -n ${NAMESPACE} delete secret ${FULLNAME}-tls`));
  });
});
