import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Histogram, Registry } from 'prom-client';
import { DurationHistogram } from '../src/server/duration-histogram.js';

/**
 * The admission duration histogram is observed as plain numbers
 * (src/server/duration-histogram.ts) but must expose what prom-client's own
 * Histogram exposes for the same observations: the same lines in the same
 * order, with the registry's default labels (the alerts and
 * docs/reference/metrics.md read them).
 */
const BUCKETS = [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1];
// Below the first bound, on bounds, between them, past the last: every bucket and +Inf.
const OBSERVATIONS: readonly [string, number][] = [
  ['injected', 0.00004],
  ['injected', 0.0001],
  ['skipped', 0.0003],
  ['injected', 0.00025],
  ['error', 0],
  ['skipped', 0.7],
  ['injected', 1],
  ['injected', 3.5],
  ['skipped', 0.0049],
  ['injected', 0.012],
];

async function exposition(defaultLabels: Record<string, string> | undefined, ours: boolean): Promise<{ text: string; json: unknown }> {
  const registry = new Registry();
  if (defaultLabels !== undefined) registry.setDefaultLabels(defaultLabels);
  const [name, help] = ['envoy_injector_admission_duration_seconds', 'Time to decide.'];
  if (ours) {
    const histogram = new DurationHistogram(name, help, 'result', BUCKETS, registry);
    for (const [result, seconds] of OBSERVATIONS) histogram.observe(histogram.series(result), seconds);
  } else {
    const histogram = new Histogram({ name, help, labelNames: ['result'], buckets: BUCKETS, registers: [registry] });
    for (const [result, seconds] of OBSERVATIONS) histogram.labels(result).observe(seconds);
  }
  const json = (await registry.getMetricsAsJSON()).map((metric) => ({ ...metric, values: metric.values.map(({ labels, value, ...rest }) => ({ labels, value, metricName: (rest as { metricName?: string }).metricName })) }));
  return { text: await registry.metrics(), json };
}

describe('the admission duration histogram', () => {
  for (const defaultLabels of [undefined, { envoy_injector_release: 'mesh' }]) {
    it(`exposes what prom-client's Histogram exposes for the same observations${defaultLabels === undefined ? '' : ', with a default label'}`, async () => {
      const ours = await exposition(defaultLabels, true);
      const theirs = await exposition(defaultLabels, false);
      assert.equal(ours.text, theirs.text);
      assert.deepEqual(ours.json, theirs.json);
      // Not two empty expositions: every series is there, each count right.
      assert.match(ours.text, /envoy_injector_admission_duration_seconds_count\{[^}]*result="injected"[^}]*\} 6\n/);
      assert.match(ours.text, /envoy_injector_admission_duration_seconds_bucket\{le="0\.00025",[^}]*result="injected"[^}]*\} 3\n/);
    });
  }

  it('shows no series before its first observation, as prom-client does, and none after a reset', async () => {
    const registry = new Registry();
    const histogram = new DurationHistogram('d_seconds', 'D.', 'result', BUCKETS, registry);
    histogram.series('injected');
    assert.doesNotMatch(await registry.metrics(), /d_seconds_count\{result="skipped"/);
    histogram.observe(histogram.series('skipped'), 0.001);
    assert.match(await registry.metrics(), /d_seconds_count\{result="skipped"\} 1/);
    histogram.reset();
    assert.doesNotMatch(await registry.metrics(), /d_seconds_count/);
  });
});
