import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { describe, it } from 'node:test';
import { parseYamlDocuments, type JsonObject } from '../src/injection/index.js';
import { ROOT } from './helpers/fixtures.js';
import { runCliCaptured as run, tempFile } from './helpers/run-cli.js';

describe('envoy-injector inject', () => {
  it('the installed bin injects the seed Pod (as `npx envoy-injector inject -f examples/myapp-pod.yaml`)', () => {
    const result = spawnSync(process.execPath, ['bin/envoy-injector.js', 'inject', '-f', 'examples/myapp-pod.yaml'], { cwd: ROOT, encoding: 'utf8' });
    assert.equal(result.status, 0, result.stderr);
    const [pod] = parseYamlDocuments(result.stdout) as JsonObject[];
    const spec = pod?.['spec'] as JsonObject;
    assert.deepEqual((spec['containers'] as JsonObject[]).map((c) => c['name']), ['myapp-container', 'envoy']);
    assert.deepEqual((spec['volumes'] as JsonObject[]).map((v) => v['name']), ['envoy-conf']);
  });

  it('reads stdin with -f -', async () => {
    const { code, stdout } = await run(['inject', '-f', '-'], 'apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: a, image: b}]}\n');
    assert.equal(code, 0);
    assert.match(stdout, /name: envoy\n/);
  });

  it('uses --template-file and --template', async () => {
    const templateFile = tempFile('t.yaml', 'kind: ConfigMap\ndata:\n  config: "containers: [{name: envoy, image: e:1}]"\n  lite: "containers: [{name: tiny, image: t:1}]"\n');
    const { code, stdout } = await run(['inject', '-f', 'examples/myapp-pod.yaml', '--template-file', templateFile, '--template', 'lite']);
    assert.equal(code, 0);
    assert.match(stdout, /name: tiny\n\s+image: t:1/);
    assert.doesNotMatch(stdout, /name: envoy\n/);
  });

  it('--native-sidecar puts the sidecar in initContainers', async () => {
    const { code, stdout } = await run(['inject', '-f', 'examples/myapp-pod.yaml', '--native-sidecar']);
    assert.equal(code, 0);
    const [pod] = parseYamlDocuments(stdout) as JsonObject[];
    assert.deepEqual(((pod?.['spec'] as JsonObject)['initContainers'] as JsonObject[]).map((c) => [c['name'], c['restartPolicy']]), [['envoy', 'Always']]);
  });

  it('reports skipped Pods and warnings on stderr, the output stays clean YAML', async () => {
    const { code, stdout, stderr } = await run(['inject', '-f', 'test/golden/existing-envoy.yaml']);
    assert.equal(code, 0);
    assert.equal(
      stderr,
      'warning: Pod/custom-proxy: the Pod already has a container named "envoy" that the injector did not add, the name of template "config"\'s proxy: it was not injected (a second envoy cannot be added, and the Pod\'s own is not ours); rename that container, name another template in envoy-injector.io/template, or annotate the Pod envoy-injector.io/inject: "false" to say it is meant\n' +
        'Pod/custom-proxy: not injected: the Pod already has a container named "envoy" that the injector did not add, the name of template "config"\'s proxy\n',
    );
    assert.doesNotThrow(() => parseYamlDocuments(stdout));
  });

  it('fails with a clear message and exit 1 on bad YAML', async () => {
    const { code, stdout, stderr } = await run(['inject', '-f', '-'], 'kind: Pod\nspec: [unclosed\n');
    assert.equal(code, 1);
    assert.equal(stdout, '');
    assert.match(stderr, /^envoy-injector: invalid YAML: .*\(line \d+\)\n$/);
  });

  it('fails with exit 1 on a document that is not an object', async () => {
    const { code, stderr } = await run(['inject', '-f', '-'], 'just a string\n');
    assert.equal(code, 1);
    assert.equal(stderr, 'envoy-injector: document 1: must be a Kubernetes object (a mapping with apiVersion and kind)\n');
  });

  it('fails with exit 1 on a bad template, naming file, template and field', async () => {
    const templateFile = tempFile('bad.yaml', 'containers: [{name: envoy, image: e, ports: [{containerPort: 0}]}]\n');
    const { code, stderr } = await run(['inject', '-f', 'examples/myapp-pod.yaml', '--template-file', templateFile]);
    assert.equal(code, 1);
    assert.equal(stderr, `envoy-injector: ${templateFile}: config: containers[0].ports[0].containerPort: must be 1-65535\n`);
  });

  it('usage errors exit 2', async () => {
    assert.equal((await run(['inject'])).code, 2);
    assert.equal((await run(['inject', '-f', 'examples/myapp-pod.yaml', '--bogus'])).code, 2);
    assert.equal((await run(['inject', '-f', 'examples/myapp-pod.yaml', '--template', 'nope'])).code, 2);
    assert.equal((await run(['inject', '-f', '/nonexistent.yaml'])).stderr, 'envoy-injector: cannot read /nonexistent.yaml: ENOENT\n');
    assert.equal((await run(['frobnicate'])).code, 2);
  });

  it('--help lists the options', async () => {
    const { code, stdout } = await run(['inject', '--help']);
    assert.equal(code, 0);
    for (const flag of ['--filename', '--template-file', '--template', '--native-sidecar']) assert.ok(stdout.includes(flag), flag);
  });
});
