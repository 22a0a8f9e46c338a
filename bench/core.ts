/**
 * The injection core's speed: the seed Pod and a ~1 MiB Pod, on the pure
 * functions (no HTTP). Prints figures; never fails on timing.
 *   node --import tsx bench/core.ts
 */
import { performance } from 'node:perf_hooks';
import { decideInjection, injectPod, parseTemplateData, BUNDLED_TEMPLATE_DATA, parseYaml, type JsonObject } from '../src/injection/index.js';
import { largePod } from '../test/helpers/large-pod.js';
import { readFileSync } from 'node:fs';

const templates = parseTemplateData(BUNDLED_TEMPLATE_DATA);
const seedPod = parseYaml(readFileSync(new URL('../examples/myapp-pod.yaml', import.meta.url), 'utf8')) as JsonObject;

/** One admission's worth of core work: decide, merge, encode the patch. */
function injectOnce(pod: JsonObject): number {
  const decision = decideInjection({
    operation: 'CREATE',
    kind: { group: '', kind: 'Pod' },
    namespace: 'default',
    namespaceLabels: { 'envoy-injector.io/inject': 'enabled' },
    pod,
    templates,
    options: {},
  });
  if (!decision.inject) throw new Error(decision.message);
  const { patch } = injectPod(pod, decision.template, { nativeSidecar: false });
  return Buffer.from(JSON.stringify(patch)).toString('base64').length;
}

/** Median time per call in µs over `rounds` rounds, after a warm-up. */
function measure(work: () => unknown, iterations: number, rounds = 7): number {
  for (let i = 0; i < iterations; i++) work();
  const perCall: number[] = [];
  for (let round = 0; round < rounds; round++) {
    const start = performance.now();
    for (let i = 0; i < iterations; i++) work();
    perCall.push(((performance.now() - start) * 1000) / iterations);
  }
  return perCall.sort((a, b) => a - b)[Math.floor(rounds / 2)] ?? NaN;
}

const rows: { case: string; kib: number; core_us: number; with_json_us: number }[] = [];
const cases: [string, JsonObject][] = [
  ['seed Pod', seedPod],
  ['large Pod 256 KiB', largePod({ containers: 10, envVars: 500, volumes: 50, targetBytes: 256 * 1024 })],
  ['large Pod 1 MiB', largePod()],
];
for (const [name, pod] of cases) {
  const json = JSON.stringify(pod);
  const kib = Buffer.byteLength(json) / 1024;
  const iterations = kib > 100 ? 50 : 20000;
  rows.push({
    case: name,
    kib: Number(kib.toFixed(1)),
    core_us: Number(measure(() => injectOnce(pod), iterations).toFixed(2)),
    // What a request costs beyond HTTP: parse the received JSON, then the core.
    with_json_us: Number(measure(() => injectOnce(JSON.parse(json) as JsonObject), iterations).toFixed(2)),
  });
}
console.table(rows);
const [seed, , large] = rows;
if (seed && large) {
  const perKib = (row: typeof seed) => row.with_json_us / row.kib;
  console.log(`seed Pod: ${seed.core_us} µs per injection (target < 100 µs)`);
  console.log(`1 MiB Pod: ${(large.with_json_us / 1000).toFixed(2)} ms with JSON parsing, ${(large.core_us / 1000).toFixed(3)} ms core only (target < 5 ms)`);
  console.log(`cost per KiB, large/seed (parse + core): ${(perKib(large) / perKib(seed)).toFixed(2)} (linear cost keeps this at or below ~1)`);
  const mid = rows[1];
  if (mid) console.log(`cost per KiB, 1 MiB/256 KiB (parse + core): ${(perKib(large) / perKib(mid)).toFixed(2)} (linear: ~1)`);
}
