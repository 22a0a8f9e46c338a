import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { runCliCaptured as run, tempFile } from './helpers/run-cli.js';
import { formatYaml, parseTemplateData, parseYaml, parseYamlDocuments, type JsonObject } from '../src/injection/index.js';

/** Plain scalars as sigs.k8s.io/yaml (go-yaml v2, YAML 1.1) turns them into JSON. */
const SCALARS: ReadonlyArray<readonly [string, unknown]> = [
  ['0644', 420],
  ['0440', 288],
  ['-0644', -420],
  ['0o17', 15],
  ['0x1F', 31],
  ['0b101', 5],
  ['1_000', 1000],
  ['+12', 12],
  ['08', 8], // not octal: go-yaml falls back to a float
  ['1e3', 1000],
  ['.5', 0.5],
  ['1.0', 1],
  ['.inf', Number.POSITIVE_INFINITY],
  ['yes', true], ['Yes', true], ['YES', true], ['y', true], ['Y', true], ['on', true], ['ON', true], ['true', true], ['True', true],
  ['no', false], ['No', false], ['n', false], ['N', false], ['off', false], ['Off', false], ['false', false], ['FALSE', false],
  ['~', null], ['null', null], ['Null', null], ['', null],
  // Strings in YAML 1.1 as Kubernetes reads it:
  ['yEs', 'yEs'], ['nO', 'nO'], ['1:20', '1:20'], ['2024-01-01', '2024-01-01'], ['0x', '0x'], ['-x', '-x'], ['1.2.3', '1.2.3'], ['0644m', '0644m'],
];

describe('YAML as Kubernetes reads it (YAML 1.1 scalars)', () => {
  for (const [text, expected] of SCALARS) {
    it(`reads \`v: ${text}\` as ${JSON.stringify(expected) ?? String(expected)}`, () => {
      assert.deepEqual(parseYaml(`v: ${text}\n`), { v: expected });
    });
  }

  it('quoted scalars stay strings, and non-string keys become their string form', () => {
    assert.deepEqual(parseYaml(`a: "0644"\nb: 'yes'\non: 1\n0644: 2\n`), { a: '0644', b: 'yes', true: 1, 420: 2 });
  });

  it('writes strings that YAML 1.1 would read as something else in quotes', () => {
    const strings = { mode: '0644', answer: 'yes', short: 'y', toggle: 'off', big: '1_000', hex: '0x1F', float: '08', half: '.5', nothing: 'null' };
    const text = formatYaml(strings);
    for (const value of Object.values(strings)) assert.match(text, new RegExp(`: '${value.replace('.', '\\.')}'\\n`), text);
    assert.deepEqual(parseYaml(text), strings);
  });

  it('any JSON survives a write and a read unchanged (property)', () => {
    fc.assert(fc.property(fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 3 })), (value) => {
      assert.equal(JSON.stringify(parseYaml(formatYaml(value))), JSON.stringify(value));
    }), { numRuns: 500 });
  });
});

const SEED_WITH_OCTAL_MODE = `apiVersion: v1
kind: ConfigMap
metadata: {name: envoy-initializer}
data:
  config: |
    containers:
      - name: envoy
        image: lyft/envoy:845747db88f102c0fd262ab234308e9e22f693a1
        volumeMounts: [{name: envoy-conf, mountPath: /etc/envoy, readOnly: yes}]
    volumes:
      - name: envoy-conf
        configMap: {name: envoy, defaultMode: 0644}
`;

function specOf(stdout: string): JsonObject {
  const [pod] = parseYamlDocuments(stdout) as JsonObject[];
  return pod?.['spec'] as JsonObject;
}

describe('templates and manifests keep their Kubernetes meaning', () => {
  it('inject with a template holding `defaultMode: 0644` and `readOnly: yes` prints 420 and true', async () => {
    const { code, stdout, stderr } = await run(['inject', '-f', 'examples/myapp-pod.yaml', '--template-file', tempFile('template.yaml', SEED_WITH_OCTAL_MODE)]);
    assert.equal(code, 0, stderr);
    assert.match(stdout, /defaultMode: 420\n/);
    assert.match(stdout, /readOnly: true\n/);
    const spec = specOf(stdout);
    assert.deepEqual((spec['volumes'] as JsonObject[])[0], { name: 'envoy-conf', configMap: { name: 'envoy', defaultMode: 420 } });
  });

  it('the ConfigMap watch reads the template text the same way', () => {
    const set = parseTemplateData({ config: 'volumes: [{name: v, secret: {secretName: s, defaultMode: 0440}}]\n' });
    assert.deepEqual(set.defaultTemplate.volumes[0], { name: 'v', secret: { secretName: 's', defaultMode: 288 } });
  });

  it("a Pod's own `defaultMode: 0644` is 420 after inject, and its quoted `'yes'` stays a string", async () => {
    const pod = `apiVersion: v1
kind: Pod
metadata: {name: p, annotations: {answer: 'yes', mode: "0644"}}
spec:
  containers: [{name: app, image: busybox, volumeMounts: [{name: data, mountPath: /data}]}]
  volumes: [{name: data, configMap: {name: data, defaultMode: 0644}}]
`;
    const { code, stdout, stderr } = await run(['inject', '-f', '-'], pod);
    assert.equal(code, 0, stderr);
    const [output] = parseYamlDocuments(stdout) as JsonObject[];
    const spec = output?.['spec'] as JsonObject;
    assert.deepEqual((spec['volumes'] as JsonObject[])[0], { name: 'data', configMap: { name: 'data', defaultMode: 420 } });
    const annotations = (output?.['metadata'] as JsonObject)['annotations'] as JsonObject;
    assert.equal(annotations['answer'], 'yes');
    assert.equal(annotations['mode'], '0644');
  });

  it('explain reads the template with the same rules (a mode above 0777 in octal is refused)', async () => {
    const template = tempFile('template.yaml', 'volumes: [{name: v, configMap: {name: c, defaultMode: 01000}}]\n');
    const { code, stderr } = await run(['explain', '-f', 'examples/myapp-pod.yaml', '--template-file', template]);
    assert.equal(code, 1);
    assert.match(stderr, /config: volumes\[0\]\.configMap\.defaultMode: must be a file mode between 0 and 0777 \(octal\), got 512/);
  });
});
