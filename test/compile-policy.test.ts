import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { isCelError, isCelList, isCelMap, run, type CelValue } from '@bufbuild/cel';
import fc from 'fast-check';
import { runCli } from '../src/cli.js';
import { PolicyLimitError } from '../src/errors.js';
import { isJsonObject, otherMeshIn, parseTemplateFile, parseYamlDocuments, windowsOnly, type JsonObject, type JsonValue } from '../src/injection/index.js';
import { celMapList, celValue, MAX_UNROLLED } from '../src/policy/cel-literal.js';
import { MATCH_CONDITION, matchConditionParts } from '../src/policy/compile-match-conditions.js';
import { compilePolicy, TEMPLATES_ANNOTATION } from '../src/policy/compile-policy.js';
import { readVariables } from '../src/policy/compile-variables.js';
import { evaluateCondition } from './helpers/selectors.js';
import { repoFile, ROOT, seedTemplates } from './helpers/fixtures.js';

/**
 * The compiler's structure; what the compiled CEL does to Pods is proven
 * against a real API server (test/e2e/policy-parity.test.ts), its text is
 * pinned by golden files (test/golden.test.ts).
 */

const namedTemplates = () => parseTemplateFile(readFileSync(join(ROOT, 'test/golden/templates.yaml'), 'utf8'));

function spec(object: JsonObject): JsonObject {
  return object['spec'] as JsonObject;
}

function expressions(policy: JsonObject): string {
  return JSON.stringify(spec(policy));
}

function celToJson(value: CelValue): JsonValue {
  if (isCelList(value)) return [...value].map(celToJson);
  if (isCelMap(value)) return Object.fromEntries([...value].map(([key, entry]) => [String(key), celToJson(entry)]));
  if (typeof value === 'bigint') return Number(value);
  if (value === null || typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') return value;
  throw new Error(`not JSON: ${String(value)}`);
}

describe('compilePolicy', () => {
  it('makes a v1 MutatingAdmissionPolicy for Pod CREATE and a binding that names it', () => {
    const { policy, binding } = compilePolicy(seedTemplates(), { name: 'mesh', failurePolicy: 'Ignore', labels: { team: 'platform' } });
    assert.equal(policy['apiVersion'], 'admissionregistration.k8s.io/v1');
    assert.equal(binding['apiVersion'], 'admissionregistration.k8s.io/v1');
    assert.equal(policy['kind'], 'MutatingAdmissionPolicy');
    assert.equal(binding['kind'], 'MutatingAdmissionPolicyBinding');
    assert.deepEqual((policy['metadata'] as JsonObject)['labels'], { team: 'platform' });
    assert.equal(spec(binding)['policyName'], 'mesh');
    assert.equal(spec(policy)['failurePolicy'], 'Ignore');
    assert.deepEqual((spec(policy)['matchConstraints'] as JsonObject)['resourceRules'], [
      { apiGroups: [''], apiVersions: ['v1'], resources: ['pods'], operations: ['CREATE'], scope: 'Namespaced' },
    ]);
    const mutations = spec(policy)['mutations'] as JsonObject[];
    assert.equal(mutations.length, 1, 'one mutation: every mutation re-encodes the whole Pod');
    assert.equal(mutations[0]?.['patchType'], 'JSONPatch');
  });

  it('v1beta1 (1.34-1.35) differs from v1 only in the apiVersion of both objects', () => {
    const settings = { name: 'mesh', nativeSidecar: true, excludedNamespaces: ['legacy'] } as const;
    const v1 = compilePolicy(seedTemplates(), settings);
    const beta = compilePolicy(seedTemplates(), { ...settings, apiVersion: 'v1beta1' });
    for (const kind of ['policy', 'binding'] as const) {
      assert.equal(beta[kind]['apiVersion'], 'admissionregistration.k8s.io/v1beta1');
      assert.deepEqual({ ...beta[kind], apiVersion: 'admissionregistration.k8s.io/v1' }, v1[kind]);
    }
  });

  it('an owner becomes the ownerReference of both objects (their garbage collection); none by default', () => {
    const owner = { apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', name: 'mesh-role', uid: '0b5c9bd2-2f1c-4f57-9d0e-6d1ed3bb0d5e' };
    const owned = compilePolicy(seedTemplates(), { owner });
    for (const object of [owned.policy, owned.binding]) assert.deepEqual((object['metadata'] as JsonObject)['ownerReferences'], [owner]);
    const plain = compilePolicy(seedTemplates());
    for (const object of [plain.policy, plain.binding]) assert.equal('ownerReferences' in (object['metadata'] as JsonObject), false);
  });

  it('excludes kube-*, its own and the configured namespaces, and disabled ones, in the binding', () => {
    const { binding } = compilePolicy(seedTemplates(), { injectorNamespace: 'mesh-system', excludedNamespaces: ['legacy', 'kube-system'] });
    const selector = (spec(binding)['matchResources'] as JsonObject)['namespaceSelector'] as JsonObject;
    assert.deepEqual(selector['matchExpressions'], [
      { key: 'kubernetes.io/metadata.name', operator: 'NotIn', values: ['kube-system', 'kube-public', 'kube-node-lease', 'mesh-system', 'legacy'] },
      { key: 'envoy-injector.io/inject', operator: 'NotIn', values: ['disabled'] },
    ]);
  });

  it('has one branch per template, and only those names pass the known-template condition', () => {
    const templates = namedTemplates();
    const { policy } = compilePolicy(templates);
    const expression = ((spec(policy)['mutations'] as JsonObject[])[0]?.['jsonPatch'] as JsonObject)['expression'] as string;
    for (const name of templates.templates.keys()) assert.ok(expression.includes(`variables.template == "${name}"`), `a branch for ${name}`);
    const known = matchConditionParts([...templates.templates.keys()], templates.defaultTemplate.name).find((part) => part.name === 'known-template');
    assert.match(String(known?.expression), /in \["config", "debug"\]$/);
    assert.ok(String((spec(policy)['matchConditions'] as JsonObject[])[0]?.['expression']).includes(`// known-template\n(${known?.expression})`));
    assert.equal((policy['metadata'] as JsonObject)['annotations'] !== undefined, true);
    const hashes = ((policy['metadata'] as JsonObject)['annotations'] as JsonObject)[TEMPLATES_ANNOTATION];
    assert.equal(hashes, [...templates.templates.values()].map((t) => `${t.name}=${t.hash}`).join(','));
  });

  it('falls back to the chosen default template, as the webhook does', () => {
    const templates = namedTemplates();
    const debug = templates.templates.get('debug');
    assert.ok(debug !== undefined);
    const { policy } = compilePolicy({ ...templates, defaultTemplate: debug });
    const template = (spec(policy)['variables'] as JsonObject[]).find((variable) => variable['name'] === 'template');
    assert.match(String(template?.['expression']), /orValue\("debug"\)\)$/);
  });

  it('writes the status annotation with the webhook\'s JSON for the template and its hash', () => {
    const templates = seedTemplates();
    const { policy } = compilePolicy(templates);
    const head = JSON.stringify({ template: 'config', hash: templates.defaultTemplate.hash, hashWithoutResources: templates.defaultTemplate.hashWithoutResources }).slice(0, -1);
    const status = (spec(policy)['variables'] as JsonObject[]).find((variable) => variable['name'] === 't0Status');
    assert.ok(String(status?.['expression']).startsWith(`${JSON.stringify(`${head},"containers":[`)} + `), 'the status JSON starts as the webhook\'s');
    assert.ok(expressions(policy).includes('jsonpatch.escapeKey(\\"envoy-injector.io/status\\")'));
  });

  it('reads only the overrides allowed', () => {
    const none = expressions(compilePolicy(seedTemplates(), { allowedOverrides: [] }).policy);
    assert.ok(!none.includes('envoy-injector.io/proxy-'), 'no override is read when none is allowed');
    const resources = expressions(compilePolicy(seedTemplates()).policy);
    assert.ok(resources.includes('envoy-injector.io/proxy-cpu') && !resources.includes('envoy-injector.io/proxy-image'));
    const image = expressions(compilePolicy(seedTemplates(), { allowedOverrides: ['proxy-image'] }).policy);
    assert.ok(image.includes('envoy-injector.io/proxy-image') && !image.includes('isQuantity'));
  });

  it('native sidecars follow the template, then the setting, and the Pod annotation wins', () => {
    const native = (settingsNative: boolean) =>
      (spec(compilePolicy(seedTemplates(), { nativeSidecar: settingsNative }).policy)['variables'] as JsonObject[]).find((v) => v['name'] === 't0Native')?.['expression'];
    const annotation = 'variables.annotations[?"envoy-injector.io/native-sidecar"].orValue("")';
    assert.equal(native(false), `${annotation} == "true"`);
    assert.equal(native(true), `${annotation} != "false"`);
  });
});

describe('celValue', () => {
  it('writes CEL literals whose values are the JSON values (checked by an independent CEL evaluator)', () => {
    fc.assert(
      fc.property(fc.jsonValue({ maxDepth: 3 }), (value) => {
        const json = JSON.parse(JSON.stringify(value)) as JsonValue;
        // Integers beyond 2^53 and -0 do not survive JSON numbers anyway.
        fc.pre(!JSON.stringify(json).match(/\d{16,}|-0\b/));
        const result = run(celValue(json), {});
        assert.ok(!isCelError(result), `${celValue(json)}: ${isCelError(result) ? result.message : ''}`);
        assert.deepEqual(celToJson(result), json);
      }),
      { numRuns: 300 },
    );
  });

  it('escapes quotes, backslashes, newlines and non-ASCII text', () => {
    const text = 'a "quoted" \\ back\nslash ~1 /é 日本';
    assert.equal(run(celValue(text), {}), text);
  });
});

describe('readVariables', () => {
  it('leaves out the variables no expression reads, however deep the chain, and keeps the order of the rest', () => {
    const variables = [
      { name: 'a', expression: 'variables.b + 1' },
      { name: 'b', expression: '1' },
      { name: 'unread', expression: 'variables.onlyUnread' },
      { name: 'onlyUnread', expression: '2' },
      { name: 'ab', expression: '3' },
    ];
    assert.deepEqual(readVariables(variables, ['variables.a']).map((variable) => variable.name), ['a', 'b']);
    assert.deepEqual(readVariables(variables, ['variables.ab']).map((variable) => variable.name), ['ab']);
  });

  it('the compiled seed policy has no variable it does not read (the seed template has no imagePullSecrets)', () => {
    const names = ((spec(compilePolicy(seedTemplates()).policy)['variables'] as JsonObject[]).map((variable) => variable['name']));
    assert.ok(!names.includes('pullSecretNames') && names.includes('containerNames'));
  });
});

describe('celMapList', () => {
  it('unrolls a map over a list variable of bounded length: the same list as the comprehension (checked by an independent CEL evaluator)', () => {
    fc.assert(
      fc.property(fc.array(fc.integer({ min: -1000, max: 1000 }), { maxLength: 4 }), fc.integer({ min: 4, max: MAX_UNROLLED }), (list, max) => {
        const unrolled = celMapList('variables.list', (element) => `${element} * 2`, max);
        assert.ok(!unrolled.includes('.map('), unrolled);
        const result = run(unrolled, { variables: { list: list.map((item) => BigInt(item)) } });
        assert.ok(!isCelError(result), `${unrolled}: ${isCelError(result) ? result.message : ''}`);
        assert.deepEqual(celToJson(result), list.map((item) => item * 2));
      }),
      { numRuns: 100 },
    );
  });

  it('keeps the comprehension for a list that is not a variable, or may be longer than it unrolls; [] stays []', () => {
    const twice = (element: string): string => `${element} * 2`;
    assert.equal(celMapList('(variables.a + variables.b)', twice, 2), '(variables.a + variables.b).map(e, e * 2)');
    assert.equal(celMapList('variables.list', twice, MAX_UNROLLED + 1), 'variables.list.map(e, e * 2)');
    assert.equal(celMapList('variables.list', twice, undefined), 'variables.list.map(e, e * 2)');
    assert.equal(celMapList('[]', twice, 3), '[]');
  });
});

describe('envoy-injector policy', () => {
  async function cli(args: readonly string[]): Promise<{ code: number; stdout: string; stderr: string }> {
    let stdout = '';
    let stderr = '';
    const code = await runCli(['policy', ...args], {
      stdin: process.stdin,
      stdout: { write: (chunk: string) => (stdout += chunk) },
      stderr: { write: (chunk: string) => (stderr += chunk) },
    });
    return { code, stdout, stderr };
  }

  it('prints the help', async () => {
    const { code, stdout } = await cli(['--help']);
    assert.equal(code, 0);
    assert.match(stdout, /MutatingAdmissionPolicy/);
  });

  it('refuses bad settings with exit 2 and nothing on stdout', async () => {
    for (const [args, message] of [
      [['--native-sidecar', 'auto'], /--native-sidecar: must be on or off/],
      [['--failure-policy', 'Never'], /--failure-policy: must be Fail or Ignore/],
      [['--name', 'Not_A_Name'], /--name: "Not_A_Name" must be a DNS-1123 subdomain/],
      [['--allowed-overrides', 'proxy-everything'], /--allowed-overrides: "proxy-everything" is not one of/],
      [['--template-file', join(ROOT, 'test/golden/templates.yaml'), '--template', 'nope'], /--template nope: no such template \(known: config, debug\)/],
    ] as const) {
      const { code, stdout, stderr } = await cli(args);
      assert.equal(code, 2, args.join(' '));
      assert.equal(stdout, '');
      assert.match(stderr, message);
    }
  });

  it('explain refuses an unknown --mode', async () => {
    let stderr = '';
    const code = await runCli(['explain', '-f', join(ROOT, 'examples/myapp-pod.yaml'), '--mode', 'sideways'], {
      stdin: process.stdin,
      stdout: { write: () => true },
      stderr: { write: (chunk: string) => (stderr += chunk) },
    });
    assert.equal(code, 2);
    assert.match(stderr, /--mode: must be webhook or policy/);
  });

  it('refuses bad API versions with exit 2', async () => {
    const { code, stderr } = await cli(['--api-version', 'v2']);
    assert.equal(code, 2);
    assert.match(stderr, /--api-version: must be v1 or v1beta1/);
  });

  describe('templates the API server would refuse as a policy (CEL limits)', () => {
    const dir = mkdtempSync(join(tmpdir(), 'ei-policy-limits-'));
    const file = (name: string, config: string): string => {
      const path = join(dir, name);
      writeFileSync(path, config);
      return path;
    };
    // JSON strings are YAML double-quoted scalars: the arg is exactly this text.
    const withArg = (arg: string): string => `containers:\n  - name: envoy\n    image: envoyproxy/envoy:v1.31.2\n    args: [${JSON.stringify(arg)}]\n`;
    const big = file('big.yaml', withArg('x'.repeat(100 * 1024)));
    const surrogate = file('surrogate.yaml', 'containers:\n  - name: envoy\n    image: envoyproxy/envoy:v1.31.2\n    args: ["\\uD800"]\n');

    it('an expression over 100,000 code points: an error naming the template, the expression and the limit', () => {
      const templates = parseTemplateFile(readFileSync(big, 'utf8'));
      assert.throws(() => compilePolicy(templates), (error: unknown) => {
        assert.ok(error instanceof PolicyLimitError);
        assert.equal(error.code, 'EI_POLICY_LIMIT');
        assert.match(error.message, /template "config": policy expression variables\.t0Containers is [\d,]+ code points; the API server refuses CEL expressions over 100,000 \(cel-go's parser limit\)/);
        return true;
      });
      // Just under the limit compiles: the bound is the API server's, not a margin of ours.
      assert.doesNotThrow(() => compilePolicy(parseTemplateFile(withArg('x'.repeat(90_000)))));
    });

    it('a lone UTF-16 surrogate: an error naming the template and the path', () => {
      assert.throws(() => compilePolicy(parseTemplateFile(readFileSync(surrogate, 'utf8'))), /template "config": containers\[0\]\.args\[0\]: holds a lone UTF-16 surrogate/);
      // A whole pair is an ordinary character.
      assert.doesNotThrow(() => compilePolicy(parseTemplateFile(withArg('\u{1F600}'))));
    });

    it('policy and explain --mode policy exit 1 with the message; inject and explain for the webhook accept the template', async () => {
      const refused = await cli(['--template-file', big]);
      assert.equal(refused.code, 1);
      assert.equal(refused.stdout, '');
      assert.match(refused.stderr, /the API server refuses CEL expressions over 100,000/);
      let stderr = '';
      const io = { stdin: process.stdin, stdout: { write: () => true }, stderr: { write: (chunk: string) => (stderr += chunk) } };
      assert.equal(await runCli(['explain', '-f', join(ROOT, 'examples/myapp-pod.yaml'), '--template-file', surrogate, '--mode', 'policy'], io), 1);
      assert.match(stderr, /lone UTF-16 surrogate/);
      assert.equal(await runCli(['explain', '-f', join(ROOT, 'examples/myapp-pod.yaml'), '--template-file', surrogate], io), 0);
      assert.equal(await runCli(['inject', '-f', join(ROOT, 'examples/myapp-pod.yaml'), '--template-file', big], io), 0);
    });
  });

  it('refuses an invalid template file with its problems, and exit 1', async () => {
    const { code, stdout, stderr } = await cli(['--template-file', join(ROOT, 'test/golden/annotation-keys.yaml')]);
    assert.equal(code, 1);
    assert.equal(stdout, '');
    assert.match(stderr, /annotation-keys\.yaml: config: .*unknown field/);
  });
});

describe('the one match condition', () => {
  it('joins its parts with &&, each parenthesized after a comment naming it (the real API server tier evaluates it)', () => {
    const templates = namedTemplates();
    const selectors = [{ matchLabels: { batch: 'true' }, matchExpressions: [] }];
    const conditions = spec(compilePolicy(templates, { neverInjectSelectors: selectors }).policy)['matchConditions'] as JsonObject[];
    assert.deepEqual(conditions.map((condition) => condition['name']), [MATCH_CONDITION]);
    const parts = matchConditionParts([...templates.templates.keys()], templates.defaultTemplate.name, selectors);
    assert.deepEqual(
      parts.map((part) => part.name),
      ['nothing-to-reorder', 'not-opted-out', 'not-never-selected', 'not-host-network', 'not-windows', 'not-other-mesh', 'known-template'],
    );
    assert.equal(conditions[0]?.['expression'], parts.map((part) => `// ${part.name}\n(${part.expression})`).join('\n&& '));
  });
});

describe('the not-windows part of the match condition', () => {
  const condition = (): string => {
    const templates = seedTemplates();
    const found = matchConditionParts([...templates.templates.keys()], templates.defaultTemplate.name).find((part) => part.name === 'not-windows');
    assert.ok(found !== undefined, 'a not-windows part of the match condition');
    return found.expression;
  };
  const terms = (...oses: string[][]): JsonObject => ({
    nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: oses.map((values) => ({ matchExpressions: [{ key: 'kubernetes.io/os', operator: 'In', values }] })) } },
  });
  const cases: [string, JsonObject, boolean][] = [
    ['a plain Pod', {}, true],
    ['spec.os.name windows', { os: { name: 'windows' } }, false],
    ['spec.os.name linux', { os: { name: 'linux' } }, true],
    ['a nodeSelector for Windows', { nodeSelector: { 'kubernetes.io/os': 'windows' } }, false],
    ['a nodeSelector for Linux', { nodeSelector: { 'kubernetes.io/os': 'linux', zone: 'a' } }, true],
    ['a required affinity for Windows only', { affinity: terms(['windows'], ['windows']) }, false],
    ['a required affinity for Windows or Linux', { affinity: terms(['windows'], ['linux']) }, true],
    ['a required affinity naming both in one term', { affinity: terms(['windows', 'linux']) }, true],
    ['a required affinity without terms', { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [] } } } }, true],
    ['a required affinity term on another key', { affinity: { nodeAffinity: { requiredDuringSchedulingIgnoredDuringExecution: { nodeSelectorTerms: [{ matchExpressions: [{ key: 'zone', operator: 'Exists' }] }] } } } }, true],
  ];
  for (const [title, podSpec, expected] of cases) {
    it(`${title}: ${expected ? 'matches' : 'does not match'}, as the webhook's windows rule decides`, () => {
      const pod = { metadata: { annotations: { 'envoy-injector.io/inject': 'true' } }, spec: { containers: [{ name: 'app', image: 'a' }], ...podSpec } };
      assert.equal(evaluateCondition(condition(), pod), expected);
      assert.equal(windowsOnly(pod) === undefined, expected);
    });
  }
});

describe('the not-other-mesh part of the match condition', () => {
  const condition = (): string => {
    const templates = seedTemplates();
    const found = matchConditionParts([...templates.templates.keys()], templates.defaultTemplate.name).find((part) => part.name === 'not-other-mesh');
    assert.ok(found !== undefined, 'a not-other-mesh part of the match condition');
    return found.expression;
  };
  const meshPods = parseYamlDocuments(repoFile('test/fixtures/other-mesh-pods.yaml')).filter(isJsonObject);
  for (const pod of meshPods) {
    const name = String((pod['metadata'] as JsonObject)['name']);
    const expected = otherMeshIn(pod) === undefined;
    it(`${name}: ${expected ? 'matches' : 'does not match'}, as the webhook's other-mesh rule decides`, () => {
      assert.equal(evaluateCondition(condition(), pod), expected);
    });
  }
  it("a Pod with our status matches whatever else it holds: the mutation restores its order, as the webhook's rule 7 comes first", () => {
    const istio = meshPods.find((pod) => otherMeshIn(pod)?.mesh === 'Istio');
    assert.ok(istio !== undefined);
    const metadata = istio['metadata'] as { annotations: Record<string, string> };
    const ours = { ...istio, metadata: { ...metadata, annotations: { ...metadata.annotations, 'envoy-injector.io/status': '{"template":"config"}' } } };
    assert.equal(evaluateCondition(condition(), ours), true);
  });
  it('a Pod without metadata maps or init containers matches', () => {
    assert.equal(evaluateCondition(condition(), { metadata: {}, spec: { containers: [{ name: 'app', image: 'a' }] } }), true);
  });
});

describe('Pod-level resources: padded by the mutation, not left out by a match condition', () => {
  const compiled = (): JsonObject => spec(compilePolicy(seedTemplates()).policy);
  const variable = (): string => {
    const found = (compiled()['variables'] as JsonObject[]).find((entry) => entry['name'] === 'podResources');
    assert.ok(found !== undefined, 'a podResources variable');
    return String(found['expression']);
  };
  it('no match condition leaves a Pod that sets spec.resources out', () => {
    assert.deepEqual((compiled()['matchConditions'] as JsonObject[]).map((entry) => entry['name']).filter((name) => String(name).includes('resources')), []);
  });
  const cases: [string, JsonObject | undefined, boolean][] = [
    ['no spec.resources', undefined, false],
    ['an empty spec.resources', {}, false],
    ['empty requests and limits', { requests: {}, limits: {} }, false],
    ['Pod-level requests', { requests: { cpu: '1' } }, true],
    ['Pod-level limits', { limits: { memory: '1Gi' } }, true],
  ];
  for (const [title, resources, expected] of cases) {
    it(`${title}: ${expected ? 'padded (variables.resourcesPadding computed)' : 'nothing to pad'}`, () => {
      const pod = { metadata: {}, spec: { containers: [{ name: 'app', image: 'a' }], ...(resources === undefined ? {} : { resources }) } };
      assert.equal(evaluateCondition(variable(), pod), expected);
    });
  }
});
