import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { TemplateError } from '../src/errors.js';
import { BUNDLED_TEMPLATE_DATA, parseTemplateData, parseTemplateFile, parseYaml, type JsonObject } from '../src/injection/index.js';
import { repoFile } from './helpers/fixtures.js';

function problemsOf(data: Record<string, string>): readonly string[] {
  try {
    parseTemplateData(data);
  } catch (error) {
    assert.ok(error instanceof TemplateError, `expected a TemplateError, got ${String(error)}`);
    assert.equal(error.code, 'EI_TEMPLATE_INVALID');
    return error.problems;
  }
  assert.fail('the template was accepted');
}

const ENVOY = 'name: envoy\n    image: envoyproxy/envoy:v1.31.2';

describe('template loading', () => {
  it('parses the seed template into containers and volumes', () => {
    const set = parseTemplateData(BUNDLED_TEMPLATE_DATA);
    assert.equal(set.defaultTemplate.name, 'config');
    assert.deepEqual(set.defaultTemplate.containers.map((c) => c['name']), ['envoy']);
    assert.deepEqual(set.defaultTemplate.volumes, [{ name: 'envoy-conf', configMap: { name: 'envoy' } }]);
    assert.match(set.defaultTemplate.hash, /^sha256:[0-9a-f]{16}$/);
    assert.ok(Object.isFrozen(set.defaultTemplate.containers[0]), 'templates are frozen so no injection can change them');
  });

  it('keeps the bundled template equal to examples/envoy-initializer.yaml', () => {
    const fromExample = parseTemplateFile(repoFile('examples/envoy-initializer.yaml'));
    const bundled = parseTemplateData(BUNDLED_TEMPLATE_DATA);
    assert.deepEqual(fromExample.defaultTemplate, bundled.defaultTemplate);
  });

  it('reads every other ConfigMap key as a named template', () => {
    const set = parseTemplateData({
      config: `containers:\n  - ${ENVOY}`,
      'debug-proxy': `containers:\n  - name: envoy\n    image: envoyproxy/envoy-debug:v1.31.2`,
    });
    assert.deepEqual([...set.templates.keys()], ['config', 'debug-proxy']);
    assert.equal(set.templates.get('debug-proxy')?.containers[0]?.['image'], 'envoyproxy/envoy-debug:v1.31.2');
  });

  it('hashes content, not layout: reordered keys give the same hash, a new image another', () => {
    const a = parseTemplateData({ config: 'containers: [{name: envoy, image: "e:1"}]' }).defaultTemplate.hash;
    const b = parseTemplateData({ config: 'containers:\n  - image: "e:1"\n    name: envoy\n' }).defaultTemplate.hash;
    const c = parseTemplateData({ config: 'containers: [{name: envoy, image: "e:2"}]' }).defaultTemplate.hash;
    assert.equal(a, b);
    assert.notEqual(a, c);
  });

  it('accepts a bare template file as the default template', () => {
    const set = parseTemplateFile(`containers:\n  - ${ENVOY}\nnativeSidecar: true\n`);
    assert.equal(set.defaultTemplate.name, 'config');
    assert.equal(set.defaultTemplate.nativeSidecar, true);
  });

  it('accepts YAML merge keys as kubectl does', () => {
    const set = parseTemplateData({ config: 'containers:\n  - &c {name: envoy, image: "e:1"}\n  - <<: *c\n    name: envoy-two\n' });
    assert.deepEqual(set.defaultTemplate.containers.map((c) => [c['name'], c['image']]), [['envoy', 'e:1'], ['envoy-two', 'e:1']]);
  });
});

describe('template validation: each broken template is rejected with the exact path', () => {
  const cases: { name: string; data: Record<string, string>; problem: string }[] = [
    { name: 'missing default', data: { other: `containers:\n  - ${ENVOY}` }, problem: 'config: required (the default template)' },
    { name: 'YAML syntax error', data: { config: 'containers: [\n  - name: x' }, problem: 'config: invalid YAML: ' },
    { name: 'not a mapping', data: { config: '- a\n- b' }, problem: 'config: must be a mapping with containers, initContainers, volumes or imagePullSecrets' },
    { name: 'empty template', data: { config: '{}' }, problem: 'config: adds nothing: give at least one of containers, initContainers, volumes, imagePullSecrets' },
    { name: 'unknown top-level field', data: { config: `containers:\n  - ${ENVOY}\nhostNetwork: true` }, problem: 'config: hostNetwork: unknown field' },
    { name: 'containers not a list', data: { config: 'containers: {name: envoy}' }, problem: 'config: containers: must be a list' },
    { name: 'container not a mapping', data: { config: 'containers: [envoy]' }, problem: 'config: containers[0]: must be a mapping' },
    { name: 'container without name', data: { config: 'containers: [{image: "e:1"}]' }, problem: 'config: containers[0].name: required' },
    { name: 'container name not DNS-1123', data: { config: 'containers: [{name: Envoy_Proxy, image: "e:1"}]' }, problem: 'config: containers[0].name: "Envoy_Proxy" must be a DNS-1123 label' },
    { name: 'container name too long', data: { config: `containers: [{name: ${'a'.repeat(64)}, image: "e:1"}]` }, problem: 'config: containers[0].name: "aaaa' },
    { name: 'container without image', data: { config: 'containers: [{name: envoy}]' }, problem: 'config: containers[0].image: required' },
    { name: 'duplicate container names across lists', data: { config: 'containers: [{name: envoy, image: "e:1"}]\ninitContainers: [{name: envoy, image: "e:1"}]' }, problem: 'config: initContainers[0].name: "envoy" duplicates containers[0].name' },
    { name: 'port out of range', data: { config: 'containers: [{name: envoy, image: "e:1", ports: [{containerPort: 80}, {containerPort: 70000}]}]' }, problem: 'config: containers[0].ports[1].containerPort: must be 1-65535' },
    { name: 'port as string', data: { config: 'containers: [{name: envoy, image: "e:1", ports: [{containerPort: "80"}]}]' }, problem: 'config: containers[0].ports[0].containerPort: must be an integer (32-bit), got "80"' },
    { name: 'port missing', data: { config: 'containers: [{name: envoy, image: "e:1", ports: [{protocol: TCP}]}]' }, problem: 'config: containers[0].ports[0].containerPort: required' },
    { name: 'bad protocol', data: { config: 'containers: [{name: envoy, image: "e:1", ports: [{containerPort: 80, protocol: HTTP}]}]' }, problem: 'config: containers[0].ports[0].protocol: must be one of TCP, UDP, SCTP' },
    { name: 'unknown container field (typo)', data: { config: 'containers: [{name: envoy, image: "e:1", imagePullPolice: Always}]' }, problem: 'config: containers[0].imagePullPolice: unknown field' },
    { name: 'args not strings', data: { config: 'containers: [{name: envoy, image: "e:1", args: [--port, 80]}]' }, problem: 'config: containers[0].args[1]: must be a string (quote numbers and booleans), got 80' },
    { name: 'env value not a string', data: { config: 'containers: [{name: envoy, image: "e:1", env: [{name: PORT, value: 80}]}]' }, problem: 'config: containers[0].env[0].value: must be a string (quote numbers and booleans)' },
    { name: 'bad quantity', data: { config: 'containers: [{name: envoy, image: "e:1", resources: {limits: {memory: 512MB}}}]' }, problem: 'config: containers[0].resources.limits.memory: "512MB" is not a quantity' },
    { name: 'request above limit', data: { config: 'containers: [{name: envoy, image: "e:1", resources: {limits: {cpu: "1"}, requests: {cpu: 1500m}}}]' }, problem: 'config: containers[0].resources.requests.cpu: must be less than or equal to the limit' },
    { name: 'probe without handler', data: { config: 'containers: [{name: envoy, image: "e:1", readinessProbe: {periodSeconds: 5}}]' }, problem: 'config: containers[0].readinessProbe: must have exactly one of exec, httpGet, tcpSocket, grpc' },
    { name: 'restartPolicy on a regular container', data: { config: 'containers: [{name: envoy, image: "e:1", restartPolicy: Always}]' }, problem: 'config: containers[0].restartPolicy: only init containers may set restartPolicy' },
    { name: 'volume with two sources', data: { config: 'volumes: [{name: conf, configMap: {name: a}, emptyDir: {}}]' }, problem: 'config: volumes[0]: may not have more than one volume source, found configMap, emptyDir' },
    { name: 'volume source misspelled', data: { config: 'volumes: [{name: conf, configmap: {name: a}}]' }, problem: 'config: volumes[0].configmap: unknown field (did you mean configMap?)' },
    { name: 'duplicate volume', data: { config: 'volumes: [{name: conf, emptyDir: {}}, {name: conf, emptyDir: {}}]' }, problem: 'config: volumes[1].name: "conf" duplicates volumes[0].name' },
    { name: 'pull secret without name', data: { config: 'imagePullSecrets: [{}]' }, problem: 'config: imagePullSecrets[0].name: required' },
    { name: 'nativeSidecar not a boolean', data: { config: `containers:\n  - ${ENVOY}\nnativeSidecar: "yes"` }, problem: 'config: nativeSidecar: must be true or false' },
    { name: 'error in a named template', data: { config: `containers:\n  - ${ENVOY}`, debug: 'containers: [{name: envoy}]' }, problem: 'debug: containers[0].image: required' },
    { name: 'duplicate mount path', data: { config: 'containers: [{name: envoy, image: "e:1", volumeMounts: [{name: a, mountPath: /etc}, {name: b, mountPath: /etc}]}]' }, problem: 'config: containers[0].volumeMounts[1].mountPath: "/etc" is already mounted by containers[0].volumeMounts[0]' },
  ];

  for (const { name, data, problem } of cases) {
    it(name, () => {
      const problems = problemsOf(data);
      assert.ok(
        problems.some((found) => found.startsWith(problem)),
        `expected a problem starting with\n  ${problem}\ngot\n  ${problems.join('\n  ')}`,
      );
    });
  }

  it('reports every problem of a template at once, and the message joins them', () => {
    try {
      parseTemplateData({ config: 'containers: [{name: A}, {image: "e:1"}]' });
      assert.fail('accepted');
    } catch (error) {
      assert.ok(error instanceof TemplateError);
      assert.deepEqual(error.problems, [
        'config: containers[0].name: "A" must be a DNS-1123 label (lowercase letters, digits and \'-\', at most 63 characters)',
        'config: containers[0].image: required',
        'config: containers[1].name: required',
      ]);
      assert.equal(error.message, error.problems.join('; '));
    }
  });

  it('a nested field of the wrong shape is reported once, at its full path', () => {
    assert.deepEqual(problemsOf({ config: 'containers: [{name: envoy, image: "e:1", ports: 80, env: [PORT]}]' }), [
      'config: containers[0].ports: must be a list, got 80',
      'config: containers[0].env[0]: must be a mapping, got "PORT"',
    ]);
  });

  it('rejects a ConfigMap file without data and a file of two documents', () => {
    assert.throws(() => parseTemplateFile('kind: ConfigMap\nmetadata: {name: x}\n'), /ConfigMap: data: required/);
    assert.throws(() => parseTemplateFile('containers: []\n---\ncontainers: []\n'), /must hold one YAML document/);
  });

  it('accepts the shapes the seed and a current Envoy need', () => {
    const template = parseYaml(repoFile('examples/envoy-initializer.yaml')) as JsonObject;
    assert.doesNotThrow(() => parseTemplateData(template['data'] as Record<string, string>));
    assert.doesNotThrow(() =>
      parseTemplateData({
        config: `containers:
  - name: envoy
    image: envoyproxy/envoy:v1.31.2
    args: ["--config-yaml", "admin: {address: {socket_address: {address: 127.0.0.1, port_value: 9901}}}"]
    ports: [{name: admin, containerPort: 9901}]
    readinessProbe: {httpGet: {path: /ready, port: admin}}
    startupProbe: {tcpSocket: {port: 9901}, failureThreshold: 30}
    securityContext: {runAsNonRoot: true, runAsUser: 101}
    resources: {requests: {cpu: 50m, memory: 64Mi}, limits: {cpu: "1", memory: 256Mi}}
    env: [{name: POD_NAME, valueFrom: {fieldRef: {fieldPath: metadata.name}}}]
volumes:
  - name: envoy-scratch
    emptyDir: {}
imagePullSecrets:
  - name: registry.example.com
`,
      }),
    );
  });
});
