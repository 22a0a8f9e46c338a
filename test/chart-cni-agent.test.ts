import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { CNI_AGENT_HELP } from '../src/commands/cni-agent.js';
import { only, renderChart, type Manifest } from './helpers/helm.js';
import { schemaProblems } from './helpers/kube-schema.js';

/**
 * The chart's node agent of capture in CNI mode (docs/design.md §11, CNI
 * mode): a DaemonSet with its ServiceAccount and ClusterRole, made only when
 * proxy.capture.mode is cni or auto. test/e2e/cni-agent.test.ts runs the
 * agent under this ServiceAccount against a real API server.
 */

type Obj = Record<string, unknown>;
const agentKinds = (manifests: readonly Manifest[]): string[] =>
  manifests.filter((manifest) => manifest.metadata.name.includes('cni-agent')).map((manifest) => manifest.kind).sort();
const podSpec = (manifests: readonly Manifest[]): Obj => ((only(manifests, 'DaemonSet')['spec'] as Obj)['template'] as Obj)['spec'] as Obj;
const container = (manifests: readonly Manifest[]): Obj => (podSpec(manifests)['containers'] as Obj[])[0] as Obj;

describe('chart: the CNI agent', () => {
  it('is rendered only when proxy.capture.mode is cni or auto', async () => {
    assert.deepEqual(agentKinds(await renderChart({})), []);
    assert.deepEqual(agentKinds(await renderChart({ proxy: { capture: { enabled: true, mode: 'initContainer' } } })), []);
    const expected = ['ClusterRole', 'ClusterRoleBinding', 'DaemonSet', 'ServiceAccount'];
    assert.deepEqual(agentKinds(await renderChart({ proxy: { capture: { mode: 'cni' } } })), expected);
    assert.deepEqual(agentKinds(await renderChart({ proxy: { capture: { mode: 'auto' } } })), expected);
    assert.deepEqual(agentKinds(await renderChart({ mode: 'policy', proxy: { capture: { mode: 'cni' } } })), expected);
  });

  it('runs privileged in the node\'s network and PID namespaces, on every node, with the node\'s CNI folders', async () => {
    const manifests = await renderChart({ proxy: { capture: { mode: 'cni' } } });
    assert.deepEqual(manifests.flatMap(schemaProblems), []);
    const spec = podSpec(manifests);
    assert.equal(spec['hostNetwork'], true);
    assert.equal(spec['hostPID'], true);
    assert.equal(spec['dnsPolicy'], 'ClusterFirstWithHostNet');
    assert.deepEqual(spec['tolerations'], [{ operator: 'Exists' }]);
    assert.equal(spec['terminationGracePeriodSeconds'], 30);
    const agent = container(manifests);
    assert.equal((agent['securityContext'] as Obj)['privileged'], true);
    assert.equal(agent['image'], 'envoy-injector-cni-agent:0.1.0');
    const volumes = Object.fromEntries((spec['volumes'] as Obj[]).map((volume) => [volume['name'], (volume['hostPath'] as Obj | undefined)?.['path']]));
    assert.deepEqual(volumes, { 'cni-bin': '/opt/cni/bin', 'cni-conf': '/etc/cni/net.d', socket: '/var/run/envoy-injector', netns: '/var/run/netns', tmp: undefined });
    const mounts = Object.fromEntries((agent['volumeMounts'] as Obj[]).map((mount) => [mount['name'], mount['mountPath']]));
    assert.deepEqual(mounts, { 'cni-bin': '/host/cni/bin', 'cni-conf': '/host/cni/net.d', socket: '/var/run/envoy-injector', netns: '/var/run/netns', tmp: '/tmp' });
    assert.deepEqual(agent['args'], ['--cni-bin-dir=/host/cni/bin', '--cni-conf-dir=/host/cni/net.d', '--socket=/var/run/envoy-injector/cni.sock', '--ready-file=/tmp/cni-ready', '--interval-seconds=2', '--metrics-port=10390', '--metrics-host=$(HOST_IP)']);
    // Every flag the chart passes is one the command takes.
    for (const arg of agent['args'] as string[]) assert.ok(CNI_AGENT_HELP.includes(`  ${arg.split('=')[0] ?? ''} `), `${arg}: not a flag of cni-agent`);
    assert.deepEqual((agent['readinessProbe'] as Obj)['exec'], { command: ['cat', '/tmp/cni-ready'] });
  });

  it('takes the node paths, image and scheduling from cniAgent.*', async () => {
    const manifests = await renderChart({
      proxy: { capture: { mode: 'auto' } },
      cniAgent: {
        image: { repository: 'registry.example/agent', digest: `sha256:${'a'.repeat(64)}` },
        binDir: '/var/lib/rancher/k3s/data/current/bin',
        confDir: '/var/lib/rancher/k3s/agent/etc/cni/net.d',
        socketDir: '/run/ei',
        intervalSeconds: 5,
        terminationGracePeriodSeconds: 60,
        priorityClassName: 'system-node-critical',
        nodeSelector: { 'kubernetes.io/os': 'linux' },
      },
    });
    const spec = podSpec(manifests);
    const agent = container(manifests);
    assert.equal(agent['image'], `registry.example/agent@sha256:${'a'.repeat(64)}`);
    const paths = (spec['volumes'] as Obj[]).map((volume) => (volume['hostPath'] as Obj | undefined)?.['path']);
    assert.deepEqual(paths.slice(0, 3), ['/var/lib/rancher/k3s/data/current/bin', '/var/lib/rancher/k3s/agent/etc/cni/net.d', '/run/ei']);
    assert.ok((agent['args'] as string[]).includes('--socket=/run/ei/cni.sock'));
    assert.ok((agent['args'] as string[]).includes('--interval-seconds=5'));
    assert.equal(spec['terminationGracePeriodSeconds'], 60);
    assert.equal(spec['priorityClassName'], 'system-node-critical');
    assert.deepEqual(spec['nodeSelector'], { 'kubernetes.io/os': 'linux' });
    await assert.rejects(renderChart({ proxy: { capture: { mode: 'cni' } }, cniAgent: { binDir: 'opt/cni/bin' } }), /cniAgent\/binDir/);
    await assert.rejects(renderChart({ proxy: { capture: { mode: 'cni' } }, cniAgent: { confDir: '/etc/cni/net.d/' } }), /cniAgent\/confDir/);
  });

  it('serves its metrics on cniAgent.metricsPort of the node, a PodMonitor behind metrics.serviceMonitor.enabled; 0 turns both off', async () => {
    const on = await renderChart({ proxy: { capture: { mode: 'cni' } }, metrics: { serviceMonitor: { enabled: true, interval: '15s' } } });
    // The Prometheus Operator's kinds have no schema here (their CRDs are not in the cluster's OpenAPI).
    assert.deepEqual(on.filter((manifest) => !manifest.kind.endsWith('Monitor')).flatMap(schemaProblems), []);
    assert.deepEqual(container(on)['ports'], [{ name: 'metrics', containerPort: 10390, protocol: 'TCP' }]);
    const daemonSet = only(on, 'DaemonSet');
    const template = ((daemonSet['spec'] as Obj)['template'] as Obj)['metadata'] as Obj;
    assert.deepEqual(template['annotations'], { 'prometheus.io/scrape': 'true', 'prometheus.io/port': '10390', 'prometheus.io/path': '/metrics' });
    const monitor = only(on, 'PodMonitor');
    assert.deepEqual((monitor['spec'] as Obj)['podMetricsEndpoints'], [{ port: 'metrics', path: '/metrics', interval: '15s' }]);
    const selected = ((monitor['spec'] as Obj)['selector'] as Obj)['matchLabels'] as Record<string, string>;
    const labels = template['labels'] as Record<string, string>;
    assert.ok(Object.entries(selected).every(([key, value]) => labels[key] === value), 'the PodMonitor does not select the agent');
    assert.deepEqual(on.filter((manifest) => manifest.kind === 'ServiceMonitor').length, 1, "the injector's ServiceMonitor stays");
    // Without the switch, no PodMonitor; without the port, no port, no annotations, no PodMonitor.
    assert.equal((await renderChart({ proxy: { capture: { mode: 'cni' } } })).some((manifest) => manifest.kind === 'PodMonitor'), false);
    const off = await renderChart({ proxy: { capture: { mode: 'cni' } }, cniAgent: { metricsPort: 0 }, metrics: { serviceMonitor: { enabled: true } } });
    assert.equal(off.some((manifest) => manifest.kind === 'PodMonitor'), false);
    assert.equal(container(off)['ports'], undefined);
    assert.equal((((only(off, 'DaemonSet')['spec'] as Obj)['template'] as Obj)['metadata'] as Obj)['annotations'], undefined);
    assert.ok((container(off)['args'] as string[]).includes('--metrics-port=0'));
    assert.equal((container(off)['args'] as string[]).some((arg) => arg.startsWith('--metrics-host')), false);
    await assert.rejects(renderChart({ proxy: { capture: { mode: 'cni' } }, cniAgent: { metricsPort: 70000 } }), /cniAgent\/metricsPort/);
  });

  it('its metrics listen on the node\'s own address (status.hostIP), not every address; cniAgent.metricsHost chooses another', async () => {
    const hostIp = (manifests: readonly Manifest[]): unknown => ((container(manifests)['env'] as Obj[]).find((env) => env['name'] === 'HOST_IP') as Obj | undefined)?.['valueFrom'];
    const metricsHost = (manifests: readonly Manifest[]): string[] => (container(manifests)['args'] as string[]).filter((arg) => arg.startsWith('--metrics-host='));
    const byDefault = await renderChart({ proxy: { capture: { mode: 'cni' } } });
    assert.deepEqual(metricsHost(byDefault), ['--metrics-host=$(HOST_IP)']);
    assert.deepEqual(hostIp(byDefault), { fieldRef: { apiVersion: 'v1', fieldPath: 'status.hostIP' } });
    const loopback = await renderChart({ proxy: { capture: { mode: 'cni' } }, cniAgent: { metricsHost: '127.0.0.1' } });
    assert.deepEqual(metricsHost(loopback), ['--metrics-host=127.0.0.1']);
    assert.equal(hostIp(loopback), undefined);
    assert.deepEqual(metricsHost(await renderChart({ proxy: { capture: { mode: 'cni' } }, cniAgent: { metricsHost: '::' } })), ['--metrics-host=::']);
    await assert.rejects(renderChart({ proxy: { capture: { mode: 'cni' } }, cniAgent: { metricsHost: 'node.example; rm' } }), /cniAgent\/metricsHost/);
  });

  it('narrows the agent to its node with a ValidatingAdmissionPolicy where the cluster serves v1 (1.30+), none before', async () => {
    const cni = { proxy: { capture: { mode: 'cni' } } };
    const policyKinds = async (options: { kubeVersion: string; apiVersions?: string[] }, values: Record<string, unknown> = cni): Promise<string[]> =>
      (await renderChart(values, options)).filter((manifest) => manifest.kind.startsWith('ValidatingAdmissionPolicy')).map((manifest) => manifest.kind).sort();
    const both = ['ValidatingAdmissionPolicy', 'ValidatingAdmissionPolicyBinding'];
    // Offline (helm template, no discovery): by --kube-version.
    assert.deepEqual(await policyKinds({ kubeVersion: '1.28.0' }), []);
    assert.deepEqual(await policyKinds({ kubeVersion: '1.29.4' }), []);
    assert.deepEqual(await policyKinds({ kubeVersion: '1.30.0' }), both);
    assert.deepEqual(await policyKinds({ kubeVersion: '1.36.0' }), both);
    // A cluster's discovery (kinds listed) decides: v1 served or not, whatever the version says.
    assert.deepEqual(await policyKinds({ kubeVersion: '1.34.0', apiVersions: ['apps/v1/Deployment'] }), []);
    assert.deepEqual(await policyKinds({ kubeVersion: '1.28.0', apiVersions: ['apps/v1/Deployment', 'admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy'] }), both);
    // No agent, no policy.
    assert.deepEqual(await policyKinds({ kubeVersion: '1.36.0' }, {}), []);

    const manifests = await renderChart(cni, { kubeVersion: '1.34.0' });
    const policy = only(manifests, 'ValidatingAdmissionPolicy');
    const spec = policy['spec'] as Obj;
    assert.equal(spec['failurePolicy'], 'Fail');
    assert.deepEqual((spec['matchConstraints'] as Obj)['resourceRules'], [
      { apiGroups: [''], apiVersions: ['v1'], operations: ['DELETE'], resources: ['pods'] },
      { apiGroups: ['events.k8s.io'], apiVersions: ['v1'], operations: ['CREATE'], resources: ['events'] },
    ]);
    const account = only(manifests, 'ServiceAccount', only(manifests, 'DaemonSet').metadata.name);
    assert.deepEqual(spec['matchConditions'], [{ name: 'is-the-cni-agent', expression: `request.userInfo.username == "system:serviceaccount:injector-system:${account.metadata.name}"` }]);
    const expressions = (spec['validations'] as Obj[]).map((validation) => String(validation['expression'])).join('\n');
    assert.match(JSON.stringify(spec['variables']), /request\.userInfo\.extra\['authentication\.kubernetes\.io\/node-name'\]\[0\]/);
    assert.match(expressions, /oldObject\.spec\.nodeName == variables\.node/);
    assert.match(expressions, /object\.reportingInstance == 'envoy-injector-cni-agent-' \+ variables\.node/);
    const binding = only(manifests, 'ValidatingAdmissionPolicyBinding');
    assert.deepEqual(binding['spec'], { policyName: policy.metadata.name, validationActions: ['Deny'] });
    assert.equal(policy.metadata.name, 'mesh-envoy-injector-injector-system-cni-agent');
  });

  it('is neither selected by the webhook\'s Service and budget nor injected; its ServiceAccount is the one bound, with least privilege', async () => {
    const manifests = await renderChart({ proxy: { capture: { mode: 'cni' } } });
    const daemonSet = only(manifests, 'DaemonSet');
    const labels = (((daemonSet['spec'] as Obj)['template'] as Obj)['metadata'] as Obj)['labels'] as Record<string, string>;
    for (const selector of [(only(manifests, 'Service')['spec'] as Obj)['selector'], ((only(manifests, 'PodDisruptionBudget')['spec'] as Obj)['selector'] as Obj)['matchLabels']] as Record<string, string>[]) {
      assert.ok(Object.entries(selector).some(([key, value]) => labels[key] !== value), `the agent's Pods match ${JSON.stringify(selector)}`);
    }
    assert.equal(labels['envoy-injector.io/injector'], daemonSet.metadata.name, 'the webhooks skip Pods with this label');
    const account = only(manifests, 'ServiceAccount', daemonSet.metadata.name);
    assert.equal(podSpec(manifests)['serviceAccountName'], account.metadata.name);
    const binding = only(manifests, 'ClusterRoleBinding', 'mesh-envoy-injector-injector-system-cni-agent');
    assert.deepEqual(binding['subjects'], [{ kind: 'ServiceAccount', name: account.metadata.name, namespace: 'injector-system' }]);
    assert.deepEqual(only(manifests, 'ClusterRole', 'mesh-envoy-injector-injector-system-cni-agent')['rules'], [
      { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch', 'delete'] },
      { apiGroups: ['events.k8s.io'], resources: ['events'], verbs: ['create'] },
    ]);
  });

  it('knows the namespaces the injector never captures, as the injector does: its own and excludedNamespaces (issue 50)', async () => {
    const plain = (container(await renderChart({ proxy: { capture: { mode: 'cni' } } }))['env'] as Obj[]).map((entry) => entry['name']);
    assert.ok(plain.includes('POD_NAMESPACE') && !plain.includes('EXCLUDED_NAMESPACES'), JSON.stringify(plain));
    const manifests = await renderChart({ proxy: { capture: { mode: 'cni' } }, excludedNamespaces: ['tools', 'batch'] });
    const agentEnv = container(manifests)['env'] as Obj[];
    assert.deepEqual(agentEnv.find((entry) => entry['name'] === 'POD_NAMESPACE'), { name: 'POD_NAMESPACE', valueFrom: { fieldRef: { apiVersion: 'v1', fieldPath: 'metadata.namespace' } } });
    const injectorEnv = (((only(manifests, 'Deployment')['spec'] as Obj)['template'] as Obj)['spec'] as Obj)['containers'] as Obj[];
    const excluded = (injectorEnv[0]?.['env'] as Obj[]).find((entry) => entry['name'] === 'EXCLUDED_NAMESPACES');
    assert.deepEqual(agentEnv.find((entry) => entry['name'] === 'EXCLUDED_NAMESPACES'), excluded);
    assert.equal(excluded?.['value'], 'tools,batch');
    // The variables the command reads.
    for (const name of ['POD_NAMESPACE', 'EXCLUDED_NAMESPACES']) assert.ok(CNI_AGENT_HELP.includes(`(${name})`), `${name}: not read by cni-agent`);
  });
});
