import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import {
  findPodTemplate,
  formatManifests,
  parseTemplateFile,
  parseYamlDocuments,
  processManifests,
  type JsonObject,
  type TemplateSet,
} from '../src/injection/index.js';
import { runCli } from '../src/cli.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { runStatusCli, seedFleet } from './helpers/fleet-fixture.js';
import { ROOT, seedTemplates } from './helpers/fixtures.js';
import { applyIndependently } from './helpers/patch.js';

/**
 * Golden files: each input manifest with its expected `inject` output next to
 * it as NAME.golden.yaml. Refresh with UPDATE_GOLDEN=1 after a deliberate
 * change, and review the diff.
 */
const GOLDEN_DIR = join(ROOT, 'test/golden');
const UPDATE = process.env['UPDATE_GOLDEN'] === '1';

interface GoldenCase {
  readonly input: string;
  readonly golden: string;
  readonly nativeSidecar?: boolean;
  readonly templateFile?: string;
}

const CASES: readonly GoldenCase[] = [
  { input: 'examples/myapp-pod.yaml', golden: 'seed-pod.golden.yaml' },
  { input: 'test/golden/deployment.yaml', golden: 'deployment.golden.yaml' },
  { input: 'test/golden/existing-envoy.yaml', golden: 'existing-envoy.golden.yaml' },
  { input: 'test/golden/pod-with-volumes.yaml', golden: 'pod-with-volumes.golden.yaml' },
  { input: 'test/golden/annotation-keys.yaml', golden: 'annotation-keys.golden.yaml' },
  { input: 'test/golden/native-job.yaml', golden: 'native-job.golden.yaml', nativeSidecar: true },
  { input: 'test/golden/mixed-kinds.yaml', golden: 'mixed-kinds.golden.yaml' },
  { input: 'test/golden/named-template.yaml', golden: 'named-template.golden.yaml', templateFile: 'test/golden/templates.yaml' },
  { input: 'test/golden/capture.yaml', golden: 'capture.golden.yaml', templateFile: 'test/golden/capture-templates.yaml' },
  { input: 'test/golden/lifecycle.yaml', golden: 'lifecycle.golden.yaml', templateFile: 'test/golden/lifecycle-templates.yaml' },
  { input: 'test/golden/tcp-probes.yaml', golden: 'tcp-probes.golden.yaml', templateFile: 'test/golden/tcp-probes-templates.yaml', nativeSidecar: true },
];

/** `policy`: the compiled MutatingAdmissionPolicy and binding, for the seed template (v1) and for named templates with every setting (v1beta1). */
const POLICY_CASES: readonly { readonly golden: string; readonly args: readonly string[]; readonly templateFile?: string }[] = [
  { golden: 'policy-seed.golden.yaml', args: ['--namespace', 'envoy-injector'] },
  {
    golden: 'policy-named.golden.yaml',
    templateFile: 'test/golden/templates.yaml',
    args: ['--namespace', 'mesh', '--excluded-namespaces', 'legacy', '--native-sidecar', 'on', '--allowed-overrides', 'proxy-cpu,proxy-memory-limit,proxy-image', '--failure-policy', 'Ignore', '--api-version', 'v1beta1'],
  },
  { golden: 'policy-capture.golden.yaml', templateFile: 'test/golden/capture-templates.yaml', args: ['--namespace', 'envoy-injector'] },
];

/** explain over kinds of Pods: opted in, opted out, excluded namespace, by label, a proxy name taken, overrides, native, a copied status, Windows, other meshes. */
const EXPLAIN_INPUT = 'explain-pods.yaml';
const EXPLAIN_GOLDEN = { text: 'explain-pods.golden.txt', json: 'explain-pods.golden.json', policy: 'explain-pods.policy.golden.txt' } as const;

/** explain with a namespace's template and proxy defaults and central selectors: where each value came from. */
const EXPLAIN_NAMESPACE = { input: 'explain-namespace.yaml', templateFile: 'templates.yaml', golden: 'explain-namespace.golden.txt' } as const;

/** explain over the capture cases (the decision and the rules' exclusions of each Pod) and the lifecycle cases (holding, the drain). */
const EXPLAIN_TEMPLATE_CASES = [
  { input: 'capture.yaml', templateFile: 'capture-templates.yaml', golden: 'explain-capture.golden.txt' },
  { input: 'lifecycle.yaml', templateFile: 'lifecycle-templates.yaml', golden: 'explain-lifecycle.golden.txt' },
  { input: 'tcp-probes.yaml', templateFile: 'tcp-probes-templates.yaml', golden: 'explain-tcp-probes.golden.txt' },
] as const;

/** status over the fleet of helpers/fleet-fixture.ts, served by the fake API server. */
const STATUS_GOLDEN = { table: 'status.golden.txt', json: 'status.golden.json' } as const;

function templatesFor(goldenCase: GoldenCase): TemplateSet {
  return goldenCase.templateFile === undefined
    ? seedTemplates()
    : parseTemplateFile(readFileSync(join(ROOT, goldenCase.templateFile), 'utf8'));
}

describe('golden files: inject output for each input manifest', () => {
  for (const goldenCase of CASES) {
    it(`${goldenCase.input} → ${goldenCase.golden}`, () => {
      const input = readFileSync(join(ROOT, goldenCase.input), 'utf8');
      const { objects, reports } = processManifests(input, {
        templates: templatesFor(goldenCase),
        decision: { offline: true, nativeSidecar: goldenCase.nativeSidecar ?? false },
      });
      const output = formatManifests(objects);
      const goldenPath = join(GOLDEN_DIR, goldenCase.golden);
      if (UPDATE) writeFileSync(goldenPath, output);
      assert.ok(existsSync(goldenPath), `${goldenCase.golden} is missing: run UPDATE_GOLDEN=1 npm test`);
      assert.equal(output, readFileSync(goldenPath, 'utf8'), `${goldenCase.golden} is stale: run UPDATE_GOLDEN=1 npm test and review the diff`);

      // The patch is what ships: applied to each received Pod by an independent
      // implementation, it must give exactly the Pod in the golden output.
      const inputPods = parseYamlDocuments(input).flatMap(podsOf);
      const outputPods = parseYamlDocuments(output).flatMap(podsOf);
      assert.equal(outputPods.length, inputPods.length);
      let reportIndex = 0;
      inputPods.forEach((received, index) => {
        const report = reports[reportIndex++];
        assert.ok(report !== undefined);
        const patch = report.injection?.patch ?? [];
        assert.deepEqual(applyIndependently(received, patch), outputPods[index]);
      });
    });
  }

  for (const format of ['text', 'json', 'policy'] as const) {
    const args = format === 'policy' ? ['--mode', 'policy'] : ['--output', format];
    it(`explain ${EXPLAIN_INPUT} ${args.join(' ')} → ${EXPLAIN_GOLDEN[format]}`, async () => {
      let stdout = '';
      const code = await runCli(['explain', '-f', join(ROOT, 'test/golden', EXPLAIN_INPUT), '--namespace-labels', 'envoy-injector.io/inject=enabled', ...args], {
        stdin: process.stdin,
        stdout: { write: (chunk: string) => (stdout += chunk) },
        stderr: { write: () => true },
      });
      assert.equal(code, 0);
      const goldenPath = join(GOLDEN_DIR, EXPLAIN_GOLDEN[format]);
      if (UPDATE) writeFileSync(goldenPath, stdout);
      assert.equal(stdout, readFileSync(goldenPath, 'utf8'), `${EXPLAIN_GOLDEN[format]} is stale: run UPDATE_GOLDEN=1 npm test and review the diff`);
      if (format === 'json') {
        // Each explained patch applies to its Pod (template) and adds what `changes` lists.
        const pods = parseYamlDocuments(readFileSync(join(ROOT, 'test/golden', EXPLAIN_INPUT), 'utf8')).flatMap(podsOf);
        const explanations = JSON.parse(stdout) as { patch: unknown[]; changes: { containers: { name: string }[] } }[];
        assert.equal(explanations.length, pods.length);
        explanations.forEach((explanation, index) => {
          const patched = applyIndependently(pods[index], explanation.patch);
          const names = ((patched?.['spec'] as JsonObject)['containers'] as JsonObject[]).map((c) => c['name']);
          for (const { name } of explanation.changes.containers) assert.ok(names.includes(name));
        });
      }
    });
  }

  for (const explainCase of EXPLAIN_TEMPLATE_CASES) {
    it(`explain ${explainCase.input} --template-file ${explainCase.templateFile} → ${explainCase.golden}`, async () => {
      let stdout = '';
      const args = ['explain', '-f', join(GOLDEN_DIR, explainCase.input), '--template-file', join(GOLDEN_DIR, explainCase.templateFile), '--namespace-labels', 'envoy-injector.io/inject=enabled'];
      const code = await runCli(args, { stdin: process.stdin, stdout: { write: (chunk: string) => (stdout += chunk) }, stderr: { write: () => true } });
      assert.equal(code, 0);
      const goldenPath = join(GOLDEN_DIR, explainCase.golden);
      if (UPDATE) writeFileSync(goldenPath, stdout);
      assert.equal(stdout, readFileSync(goldenPath, 'utf8'), `${explainCase.golden} is stale: run UPDATE_GOLDEN=1 npm test and review the diff`);
    });
  }

  it(`explain ${EXPLAIN_NAMESPACE.input} --template-file ${EXPLAIN_NAMESPACE.templateFile} (namespace template, defaults, selectors) → ${EXPLAIN_NAMESPACE.golden}`, async () => {
    let stdout = '';
    const args = [
      'explain', '-f', join(GOLDEN_DIR, EXPLAIN_NAMESPACE.input), '--template-file', join(GOLDEN_DIR, EXPLAIN_NAMESPACE.templateFile),
      '--namespace-labels', 'envoy-injector.io/inject=enabled,envoy-injector.io/template=debug',
      '--namespace-annotations', 'envoy-injector.io/proxy-cpu=200m,envoy-injector.io/proxy-memory=lots,example.com/ignored=x',
      '--never-inject-selector', '[{"matchLabels":{"app":"db"}}]',
      '--always-inject-selector', '[{"matchExpressions":[{"key":"mesh","operator":"Exists"}]}]',
    ];
    const code = await runCli(args, { stdin: process.stdin, stdout: { write: (chunk: string) => (stdout += chunk) }, stderr: { write: () => true } });
    assert.equal(code, 0);
    const goldenPath = join(GOLDEN_DIR, EXPLAIN_NAMESPACE.golden);
    if (UPDATE) writeFileSync(goldenPath, stdout);
    assert.equal(stdout, readFileSync(goldenPath, 'utf8'), `${EXPLAIN_NAMESPACE.golden} is stale: run UPDATE_GOLDEN=1 npm test and review the diff`);
  });

  for (const format of ['table', 'json'] as const) {
    it(`status --output ${format} over the fleet fixture → ${STATUS_GOLDEN[format]}`, async () => {
      const fake = await FakeApiServer.start();
      try {
        seedFleet(fake);
        const { code, stdout, stderr } = await runStatusCli(['--kubeconfig', fake.writeKubeconfig(), '--output', format]);
        assert.equal(code, 3, stderr);
        const goldenPath = join(GOLDEN_DIR, STATUS_GOLDEN[format]);
        if (UPDATE) writeFileSync(goldenPath, stdout);
        assert.equal(stdout, readFileSync(goldenPath, 'utf8'), `${STATUS_GOLDEN[format]} is stale: run UPDATE_GOLDEN=1 npm test and review the diff`);
        if (format === 'table') assert.ok(readFileSync(join(ROOT, 'docs/fleet.md'), 'utf8').includes('```\n' + stdout + '```\n'), 'docs/fleet.md shows this very table: copy it there');
      } finally {
        await fake.close();
      }
    });
  }

  for (const policyCase of POLICY_CASES) {
    it(`policy ${policyCase.args.join(' ')} → ${policyCase.golden}`, async () => {
      let stdout = '';
      const templateArgs = policyCase.templateFile === undefined ? [] : ['--template-file', join(ROOT, policyCase.templateFile)];
      const code = await runCli(['policy', ...templateArgs, ...policyCase.args], {
        stdin: process.stdin,
        stdout: { write: (chunk: string) => (stdout += chunk) },
        stderr: { write: () => true },
      });
      assert.equal(code, 0);
      const goldenPath = join(GOLDEN_DIR, policyCase.golden);
      if (UPDATE) writeFileSync(goldenPath, stdout);
      assert.ok(existsSync(goldenPath), `${policyCase.golden} is missing: run UPDATE_GOLDEN=1 npm test`);
      assert.equal(stdout, readFileSync(goldenPath, 'utf8'), `${policyCase.golden} is stale: run UPDATE_GOLDEN=1 npm test and review the diff`);
      const kinds = parseYamlDocuments(stdout).map((document) => (document as JsonObject)['kind']);
      assert.deepEqual(kinds, ['MutatingAdmissionPolicy', 'MutatingAdmissionPolicyBinding']);
    });
  }

  it('has no golden or input file that no case uses', () => {
    const explainFiles = [EXPLAIN_INPUT, ...Object.values(EXPLAIN_GOLDEN), ...EXPLAIN_TEMPLATE_CASES.flatMap((c) => [c.input, c.templateFile, c.golden]), ...Object.values(EXPLAIN_NAMESPACE), ...POLICY_CASES.map((c) => c.golden), ...Object.values(STATUS_GOLDEN)];
    const used = new Set([...explainFiles, ...CASES.flatMap((c) => [c.golden, c.input, c.templateFile].filter((f) => f !== undefined).map((f) => f.replace('test/golden/', '')))]);
    const unused = readdirSync(GOLDEN_DIR).filter((file) => !used.has(file));
    assert.deepEqual(unused, [], 'remove these files or add a case for them');
  });
});

function podsOf(document: unknown): JsonObject[] {
  const object = document as JsonObject;
  if (object['kind'] === 'List') return (object['items'] as unknown[]).flatMap(podsOf);
  const location = findPodTemplate(object);
  return location === undefined ? [] : [location.pod];
}
