import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { PatchMemo } from '../src/admission/index.js';
import {
  admitPod,
  applyPodPatch,
  injectorAnnotations,
  namespaceProxyIds,
  OpenShiftAnnotation,
  parseIdBlock,
  parseTemplateData,
  parseTemplateFile,
  type Admission,
  type JsonObject,
  type TemplateSet,
} from '../src/injection/index.js';
import { ROOT } from './helpers/fixtures.js';
import { storedThroughReview } from './helpers/reviews.js';
import { runCliCaptured, tempFile } from './helpers/run-cli.js';
import { only, renderChart } from './helpers/helm.js';

/**
 * The proxy's user and group from the namespace's OpenShift ranges (issue
 * 53, docs/design.md §11): the range's last uid for the proxy and the rules,
 * the one below it for CNI mode's check, the first group block's last for
 * the proxy's group; `auto` captures in CNI mode there; a bad range is a
 * warning and the template's uid.
 */

const templates: TemplateSet = parseTemplateFile(readFileSync(join(ROOT, 'test/golden/capture-templates.yaml'), 'utf8'));

type Obj = Record<string, unknown>;

const RANGE = { [OpenShiftAnnotation.uidRange]: '1000620000/10000', [OpenShiftAnnotation.supplementalGroups]: '1000620000/10000' };
const FIRST = 1000620000;
const LAST = 1000629999;

function pod(template: string, spec: Obj = {}, annotations: Record<string, string> = {}): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: 'web', annotations: { 'envoy-injector.io/inject': 'true', 'envoy-injector.io/template': template, 'envoy-injector.io/capture': 'true', ...annotations } },
    spec: { containers: [{ name: 'app', image: 'nginx:1.27' }], ...spec },
  } as JsonObject;
}

function admit(received: JsonObject, namespaceAnnotations: Record<string, string> | undefined, namespace = 'shop'): Admission & { stored: Obj } {
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace, namespaceLabels: {}, namespaceAnnotations, pod: received, templates, options: { nativeSidecar: true } });
  assert.ok(admission.injection !== undefined, 'the Pod is injected');
  return { ...admission, stored: applyPodPatch(received, admission.injection.patch) as Obj };
}

/** Every user and group id the stored Pod names, with where. */
function idsOf(stored: Obj): { where: string; field: string; id: unknown }[] {
  const spec = stored['spec'] as Obj;
  const found: { where: string; field: string; id: unknown }[] = [];
  const context = (where: string, securityContext: unknown): void => {
    for (const field of ['runAsUser', 'runAsGroup', 'fsGroup']) {
      const id = (securityContext as Obj | undefined)?.[field];
      if (id !== undefined) found.push({ where, field, id });
    }
  };
  context('Pod', spec['securityContext']);
  for (const list of ['initContainers', 'containers']) for (const container of (spec[list] as Obj[] | undefined) ?? []) context(String(container['name']), container['securityContext']);
  return found;
}

const container = (stored: Obj, name: string): Obj | undefined =>
  ['initContainers', 'containers'].flatMap((list) => ((stored['spec'] as Obj)[list] as Obj[] | undefined) ?? []).find((entry) => entry['name'] === name);
const proxyUidArg = (entry: Obj | undefined): string | undefined => ((entry?.['args'] as string[] | undefined) ?? []).find((arg) => arg.startsWith('--proxy-uid='));
const status = (stored: Obj): Obj => JSON.parse(String(((stored['metadata'] as Obj)['annotations'] as Obj)['envoy-injector.io/status'])) as Obj;

describe('parseIdBlock: OpenShift notation of a block of ids', () => {
  const cases: [string, ReturnType<typeof parseIdBlock>][] = [
    ['1000620000/10000', { first: 1000620000, last: 1000629999 }],
    ['1000620000-1000629999', { first: 1000620000, last: 1000629999 }],
    ['5/1', { first: 5, last: 5 }],
    ['abc', 'is not "<first>/<size>" or "<first>-<last>"'],
    ['/', 'is not "<first>/<size>" or "<first>-<last>"'],
    ['', 'is not "<first>/<size>" or "<first>-<last>"'],
    [' 1000/10', 'is not "<first>/<size>" or "<first>-<last>"'],
    ['1000/10/2', 'is not "<first>/<size>" or "<first>-<last>"'],
    ['-1/10', 'is not "<first>/<size>" or "<first>-<last>"'],
    ['12345678901/1', 'is not "<first>/<size>" or "<first>-<last>"'],
    ['1000/0', 'has a size of 0: it holds no id'],
    ['20-10', 'ends before it starts'],
    ['2147483000/1000', 'ends past 2147483647, the largest id Kubernetes accepts'],
  ];
  for (const [text, expected] of cases) {
    it(`${JSON.stringify(text)}`, () => assert.deepEqual(parseIdBlock(text), expected));
  }
});

describe('namespaceProxyIds: the rule', () => {
  it("the proxy takes the uid range's last id, its group the first group block's last, the check the uid below the proxy's", () => {
    const outcome = namespaceProxyIds('shop', { [OpenShiftAnnotation.uidRange]: '1000620000/10000', [OpenShiftAnnotation.supplementalGroups]: '1000700000/5000,1000800000/10' });
    assert.deepEqual(outcome, { ids: { uid: LAST, gid: 1000704999, checkUid: LAST - 1, uidRange: '1000620000/10000' }, openshift: true, warnings: [] });
  });

  it("without supplemental groups the group is the uid range's last id (OpenShift's own fallback)", () => {
    assert.equal(namespaceProxyIds('shop', { [OpenShiftAnnotation.uidRange]: '1000620000/10000' }).ids?.gid, LAST);
  });

  it('no uid range: nothing known, not OpenShift (only the group range says nothing of the uid)', () => {
    assert.deepEqual(namespaceProxyIds('shop', undefined), { ids: undefined, openshift: false, warnings: [] });
    assert.deepEqual(namespaceProxyIds('shop', { [OpenShiftAnnotation.supplementalGroups]: '1000620000/10000' }), { ids: undefined, openshift: false, warnings: [] });
  });

  it('a malformed range is a warning naming the namespace and the value, and no ids', () => {
    for (const range of ['abc', '/', '1000620000/0']) {
      const outcome = namespaceProxyIds('shop', { [OpenShiftAnnotation.uidRange]: range });
      assert.equal(outcome.ids, undefined);
      assert.equal(outcome.openshift, true);
      assert.equal(outcome.warnings.length, 1);
      assert.match(outcome.warnings[0] ?? '', new RegExp(`^namespace "shop" annotation openshift.io/sa.scc.uid-range: ${JSON.stringify(range).replace(/[/]/g, '\\/')} .*; the proxy runs as the template's uid, which the namespace's SCC may refuse$`));
    }
  });

  it('a range of one id, or of two where the lower is root, is too small: the proxy would share its uid with the app or the check would be root', () => {
    for (const range of ['1000620000/1', '0/2', '0-1']) {
      const outcome = namespaceProxyIds('shop', { [OpenShiftAnnotation.uidRange]: range });
      assert.equal(outcome.ids, undefined, range);
      assert.match(outcome.warnings[0] ?? '', /holds fewer than two ids above 0/);
    }
    assert.deepEqual(namespaceProxyIds('shop', { [OpenShiftAnnotation.uidRange]: '1/2' }).ids, { uid: 2, gid: 2, checkUid: 1, uidRange: '1/2' });
  });

  it("a bad group range is a warning, and the group is the uid range's last id", () => {
    const outcome = namespaceProxyIds('shop', { [OpenShiftAnnotation.uidRange]: '1000620000/10000', [OpenShiftAnnotation.supplementalGroups]: 'x,1000700000/10' });
    assert.equal(outcome.ids?.gid, LAST);
    assert.deepEqual(outcome.warnings, [`namespace "shop" annotation openshift.io/sa.scc.supplemental-groups: "x,1000700000/10": its first block is not "<first>/<size>" or "<first>-<last>"; the proxy's group is the uid range's last id, ${LAST}`]);
  });
});

describe("the namespace metadata the webhook keeps: its own annotations and OpenShift's two ranges, nothing else", () => {
  it('keeps the uid range and the supplemental groups, not the MCS label nor any other of OpenShift\'s', () => {
    const kept = injectorAnnotations({ ...RANGE, 'openshift.io/sa.scc.mcs': 's0:c25,c10', 'openshift.io/description': 'a long text', 'envoy-injector.io/proxy-cpu': '100m', 'kubectl.kubernetes.io/last-applied-configuration': '{}' });
    assert.deepEqual(kept, { ...RANGE, 'envoy-injector.io/proxy-cpu': '100m' });
    assert.equal(injectorAnnotations({ 'openshift.io/sa.scc.mcs': 's0:c25,c10' }), undefined);
  });
});

describe('an injected Pod in a namespace with a uid range (issue 53)', () => {
  it('auto mode: captured in CNI mode, and every id the Pod names is inside the ranges', () => {
    const { stored, capture, warnings } = admit(pod('auto'), RANGE);
    assert.ok(capture?.capture === true);
    assert.equal(capture.mode, 'cni');
    assert.match(capture.message, /in CNI mode: namespace "shop" has an OpenShift uid range \(openshift.io\/sa.scc.uid-range\), where the SCC refuses envoy-init/);
    for (const { where, field, id } of idsOf(stored)) assert.ok(typeof id === 'number' && id >= FIRST && id <= LAST, `${where} ${field} ${String(id)} is outside 1000620000/10000`);
    assert.deepEqual((container(stored, 'envoy')?.['securityContext'] as Obj)['runAsUser'], LAST);
    assert.deepEqual((container(stored, 'envoy')?.['securityContext'] as Obj)['runAsGroup'], LAST);
    const check = container(stored, 'envoy-capture-check');
    assert.equal((check?.['securityContext'] as Obj)['runAsUser'], LAST - 1);
    assert.equal(proxyUidArg(check), `--proxy-uid=${LAST}`);
    assert.equal(container(stored, 'envoy-init'), undefined);
    assert.equal(status(stored)['proxyUid'], LAST);
    assert.deepEqual(warnings, []);
  });

  it('cni mode: the same ids', () => {
    const { stored } = admit(pod('cni'), RANGE);
    assert.deepEqual(idsOf(stored).map(({ where, field, id }) => `${where}.${field}=${String(id)}`), [
      `envoy-capture-check.runAsUser=${LAST - 1}`,
      `envoy-capture-check.runAsGroup=${LAST}`,
      `envoy.runAsUser=${LAST}`,
      `envoy.runAsGroup=${LAST}`,
    ]);
  });

  it("a template whose proxy sets no user still gets the range's: the rules' owner match must be the proxy's real uid", () => {
    const { stored } = admit(pod('always'), RANGE);
    assert.equal((container(stored, 'envoy')?.['securityContext'] as Obj | undefined)?.['runAsUser'], LAST);
    assert.equal(proxyUidArg(container(stored, 'envoy-init')), `--proxy-uid=${LAST}`);
  });

  it('initContainer mode keeps envoy-init (root: only an SCC that allows it admits the Pod) and says so', () => {
    const { stored, warnings, capture } = admit(pod('config'), RANGE);
    assert.ok(capture?.capture === true);
    assert.equal(capture.mode, 'initContainer');
    assert.equal(proxyUidArg(container(stored, 'envoy-init')), `--proxy-uid=${LAST}`);
    assert.ok(warnings.some((warning) => /envoy-init runs as root with NET_ADMIN, which OpenShift's restricted-v2 SCC refuses/.test(warning)), JSON.stringify(warnings));
  });

  it('without a range, nothing changes: the template\'s 1337, the check as 65532, no proxyUid in the status', () => {
    const { stored, capture } = admit(pod('cni'), undefined);
    assert.ok(capture?.capture === true);
    assert.equal((container(stored, 'envoy')?.['securityContext'] as Obj)['runAsUser'], 1337);
    assert.equal((container(stored, 'envoy-capture-check')?.['securityContext'] as Obj)['runAsUser'], 65532);
    assert.equal(status(stored)['proxyUid'], undefined);
    const auto = admit(pod('auto'), undefined).capture;
    assert.ok(auto?.capture === true);
    assert.equal(auto.mode, 'initContainer');
  });

  it('a malformed range: the Pod is injected with the template\'s uid and the warning', () => {
    for (const range of ['abc', '/', '1000620000/0']) {
      const { stored, warnings } = admit(pod('cni'), { [OpenShiftAnnotation.uidRange]: range });
      assert.equal((container(stored, 'envoy')?.['securityContext'] as Obj)['runAsUser'], 1337);
      assert.equal(proxyUidArg(container(stored, 'envoy-capture-check')), '--proxy-uid=1337');
      assert.ok(warnings.some((warning) => warning.startsWith(`namespace "shop" annotation openshift.io/sa.scc.uid-range: ${JSON.stringify(range)}`)), JSON.stringify(warnings));
    }
  });

  it("an app container running as the range's last uid gets the clash warning with that uid", () => {
    const { warnings } = admit(pod('cni', { containers: [{ name: 'app', image: 'nginx:1.27', securityContext: { runAsUser: LAST } }] }), RANGE);
    assert.ok(warnings.some((warning) => warning.startsWith(`container "app" runs as user ${LAST} (its securityContext.runAsUser), the proxy's uid`)), JSON.stringify(warnings));
    const quiet = admit(pod('cni', { containers: [{ name: 'app', image: 'nginx:1.27', securityContext: { runAsUser: 1337 } }] }), RANGE).warnings;
    assert.ok(!quiet.some((warning) => warning.includes("the proxy's uid")), '1337 is no longer the proxy\'s uid there');
  });

  it("the webhook's patch memo never gives one namespace's uid to another, nor an old range's after a change", () => {
    const memo = new PatchMemo();
    const context = (annotations: Record<string, string> | undefined) => ({ templates, namespaceLabels: {}, namespaceAnnotations: annotations, options: { nativeSidecar: true }, memo });
    const proxyUser = (stored: JsonObject): unknown => ((container(stored as Obj, 'envoy')?.['securityContext'] as Obj | undefined) ?? {})['runAsUser'];
    const other = { [OpenShiftAnnotation.uidRange]: '1000700000/10000' };
    const plain = pod('cni');
    assert.equal(proxyUser(storedThroughReview(plain, 'a', 'shop', context(RANGE))), LAST);
    assert.equal(proxyUser(storedThroughReview(plain, 'b', 'shop', context(RANGE))), LAST);
    assert.equal(proxyUser(storedThroughReview(plain, 'c', 'books', context(other))), 1000709999);
    assert.equal(proxyUser(storedThroughReview(plain, 'd', 'plain', context(undefined))), 1337);
    // The same namespace, its range changed: the new range's uid, not the memoised one.
    assert.equal(proxyUser(storedThroughReview(plain, 'e', 'shop', context(other))), 1000709999);
    assert.equal(proxyUidArg(container(storedThroughReview(plain, 'f', 'shop', context(RANGE)) as Obj, 'envoy-capture-check')), `--proxy-uid=${LAST}`);
  });
});

describe("explain: the proxy's ids and where they come from", () => {
  const manifest = (): string => tempFile('ranged.yaml', JSON.stringify(pod('cni')));
  it("prints the range's uid in the rules and as the proxy's user and group, from the namespace", async () => {
    const { code, stdout } = await runCliCaptured(['explain', '-f', manifest(), '--template-file', join(ROOT, 'test/golden/capture-templates.yaml'), '--namespace', 'shop', '--namespace-annotations', `${OpenShiftAnnotation.uidRange}=1000620000/10000`]);
    assert.equal(code, 0, stdout);
    assert.match(stdout, new RegExp(`except uid ${LAST},`));
    assert.match(stdout, new RegExp(`securityContext\\.runAsUser +${LAST} +\\(namespace "shop"'s annotation\\)`));
    assert.match(stdout, new RegExp(`securityContext\\.runAsGroup +${LAST} +\\(namespace "shop"'s annotation\\)`));
  });

  it('without a range: no such line, the rules name the template\'s uid', async () => {
    const { stdout } = await runCliCaptured(['explain', '-f', manifest(), '--template-file', join(ROOT, 'test/golden/capture-templates.yaml'), '--namespace', 'shop']);
    assert.match(stdout, /except uid 1337,/);
    assert.doesNotMatch(stdout, /securityContext\.runAsUser/);
  });
});

describe("the chart's own template in a namespace with a uid range", () => {
  const chartTemplates = async (values: Record<string, unknown>): Promise<TemplateSet> =>
    parseTemplateData(only(await renderChart(values), 'ConfigMap', 'envoy-initializer')['data'] as Record<string, string>);
  const admitWith = (set: TemplateSet, received: JsonObject, labels: Record<string, string> = {}): Admission & { stored: Obj } => {
    const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: labels, namespaceAnnotations: RANGE, pod: received, templates: set, options: { nativeSidecar: true } });
    assert.ok(admission.injection !== undefined);
    return { ...admission, stored: applyPodPatch(received, admission.injection.patch) as Obj };
  };
  const chartPod = (annotations: Record<string, string> = {}, spec: Obj = {}): JsonObject =>
    ({ apiVersion: 'v1', kind: 'Pod', metadata: { name: 'web', annotations: { 'envoy-injector.io/inject': 'true', 'envoy-injector.io/capture': 'true', ...annotations } }, spec: { containers: [{ name: 'app', image: 'nginx:1.27' }], ...spec } }) as JsonObject;

  it('auto: every id the Pod names is inside the range', async () => {
    const { stored, capture } = admitWith(await chartTemplates({ proxy: { capture: { mode: 'auto' } } }), chartPod());
    assert.ok(capture?.capture === true && capture.mode === 'cni');
    const found = idsOf(stored);
    assert.ok(found.length >= 4, JSON.stringify(found));
    for (const { where, field, id } of found) assert.ok(typeof id === 'number' && id >= FIRST && id <= LAST, `${where} ${field} ${String(id)}`);
  });

  it("TPROXY (allowed by the template): the proxy is root in the range's last id as its group, the rules let that group out, a container of that group is warned about", async () => {
    const { stored, warnings } = admitWith(await chartTemplates({ proxy: { capture: { interception: 'tproxy' } } }), chartPod({}, { containers: [{ name: 'app', image: 'nginx:1.27', securityContext: { runAsGroup: LAST } }] }));
    const context = container(stored, 'envoy')?.['securityContext'] as Obj;
    assert.deepEqual([context['runAsUser'], context['runAsGroup']], [0, LAST]);
    const args = (container(stored, 'envoy-init')?.['args'] as string[] | undefined) ?? [];
    assert.ok(args.includes(`--proxy-uid=${LAST}`) && args.includes('--interception=tproxy'), JSON.stringify(args));
    assert.ok(warnings.some((warning) => warning.startsWith(`container "app" runs as group ${LAST} (its securityContext.runAsGroup), the proxy's group under TPROXY`)), JSON.stringify(warnings));
  });
});
