import assert from 'node:assert/strict';
import { after, before, it } from 'node:test';
import { admitPod, parseTemplateData, utf8Length, type JsonObject, type TemplateSet } from '../../src/injection/index.js';
import { startChartParityRun, type ChartParityRun } from './chart-parity-run.js';
import { forEachKubeVersion, servedPolicyApiVersion } from './control-plane.js';
import { isInjected, ParityRun, Path } from './policy-parity.js';

/**
 * The bound on the injected Pod's annotations (issue 50, docs/design.md §14)
 * at its edge, on a real API server, in both modes alike: a Pod whose own
 * annotations leave exactly room for what the injection writes is injected
 * (its annotations then exactly 262,144 bytes), one byte more and both modes
 * leave it as it was, where before the API server refused it. Counted in
 * bytes of UTF-8 (the filler mixes two-byte characters in: a count of
 * characters would be thousands off), with the Pod's own autoscaler
 * annotation, which ours replaces, and without.
 */

const LIMIT = 262144;
const ENABLED = { 'envoy-injector.io/inject': 'enabled' };
const bytesOf = (annotations: Record<string, string>): number => Object.entries(annotations).reduce((sum, [key, value]) => sum + utf8Length(key) + utf8Length(value), 0);

const VARIANTS = [
  { name: 'classic', native: 'false', capture: 'false', evict: false },
  { name: 'classic, capture, its own autoscaler annotation', native: 'false', capture: 'true', evict: true },
  { name: 'native', native: 'true', capture: 'false', evict: true },
  { name: 'native, capture', native: 'true', capture: 'true', evict: false },
] as const;

function pod(variant: (typeof VARIANTS)[number], filler: string): JsonObject {
  const annotations: Record<string, string> = {
    'envoy-injector.io/native-sidecar': variant.native,
    'envoy-injector.io/capture': variant.capture,
    ...(variant.evict ? { 'cluster-autoscaler.kubernetes.io/safe-to-evict-local-volumes': 'scratch' } : {}),
    'example.com/notes': filler,
  };
  return { apiVersion: 'v1', kind: 'Pod', metadata: { annotations }, spec: { containers: [{ name: 'app', image: 'registry.example/app:1.0' }], volumes: [{ name: 'scratch', emptyDir: {} }] } };
}

/** The filler that makes VARIANT's injected annotations total LIMIT + OVER bytes, measured with the webhook's own merge. */
function fillerFor(variant: (typeof VARIANTS)[number], templates: TemplateSet, over: number): string {
  const probe = pod(variant, '');
  const admission = admitPod({ operation: 'CREATE', kind: { group: '', kind: 'Pod' }, namespace: 'shop', namespaceLabels: ENABLED, pod: probe, templates, options: { nativeSidecar: false } });
  const written = admission.injection?.writtenAnnotations;
  assert.ok(written !== undefined, `${variant.name}: injected`);
  const own = ((probe['metadata'] as JsonObject)['annotations'] ?? {}) as Record<string, string>;
  const room = LIMIT + over - bytesOf({ ...own, ...written });
  // Half of it in two-byte characters, the rest ASCII.
  const wide = Math.floor(room / 4);
  return 'é'.repeat(wide) + 'x'.repeat(room - 2 * wide);
}

forEachKubeVersion('the injected Pod\'s annotations at the API server\'s bound, webhook and policy mode alike', (plane, version) => {
  const apiVersion = servedPolicyApiVersion(version);
  if (apiVersion === undefined) {
    it(`${version}: skipped, no policy mode; the webhook's bound is the same code on every version (test/annotations-size.test.ts)`, () => undefined);
    return;
  }
  let chart: ChartParityRun | undefined;
  let run: ParityRun | undefined;
  let templates: TemplateSet;
  before(async () => {
    chart = await startChartParityRun(plane(), apiVersion);
    ({ run } = chart);
    templates = parseTemplateData(chart.configMap['data'] as Record<string, string>);
  });
  after(async () => {
    await chart?.stop();
  });

  it('exactly at the bound: injected by both; one byte past it: stored as written by both (the webhook says why), never refused', async () => {
    assert.ok(run !== undefined);
    const problems: string[] = [];
    let index = 0;
    for (const variant of VARIANTS) {
      for (const over of [0, 1]) {
        const subject = pod(variant, fillerFor(variant, templates, over));
        for (const path of [Path.webhook, Path.policy]) {
          const { stored, warnings } = await run.createIn(path, 'enabled', subject, `bound-${++index}`);
          const where = `${variant.name}, ${over === 0 ? 'at the bound' : 'one byte past'}, ${path}`;
          const answer = stored as JsonObject;
          if (answer['refused'] !== undefined) {
            problems.push(`${where}: refused: ${String(answer['message'])}`);
            continue;
          }
          const annotations = ((answer['metadata'] as JsonObject)['annotations'] ?? {}) as Record<string, string>;
          if (over === 0) {
            if (!isInjected(stored)) problems.push(`${where}: not injected (warnings: ${warnings.join(' | ')})`);
            else if (bytesOf(annotations) !== LIMIT) problems.push(`${where}: its annotations total ${bytesOf(annotations)} bytes, not ${LIMIT}`);
          } else {
            if (isInjected(stored)) problems.push(`${where}: injected`);
            if (path === Path.webhook && !warnings.some((warning) => /over the API server's limit of 262144/.test(warning))) problems.push(`${where}: no warning says why (${warnings.join(' | ')})`);
          }
        }
      }
    }
    assert.deepEqual(problems, []);
  });
});
