import type { ClusterFigures, ColdStart, MemoryFlatness, ScenarioResult } from './figures.js';
import { fmt, MIB } from './format.js';

export interface Target {
  readonly name: string;
  readonly value: string;
  readonly limit: string;
  readonly pass: boolean;
}

/** PASS/FAIL per target, for the parts that ran. Timing never fails the run: these are reported, not asserted. */
export function evaluateTargets(scenarios: readonly ScenarioResult[], memory: MemoryFlatness | undefined, cold: ColdStart | undefined, cluster: ClusterFigures | undefined): Target[] {
  const targets: Target[] = [];
  const seed = scenarios.find((scenario) => scenario.name === 'seed');
  if (seed !== undefined) {
    targets.push(
      // Issue 27's (issue 14's were 0.8×, 1.3×, 1.3×).
      { name: 'seed throughput ≥ 0.9× floor', value: fmt.ratio(seed.ratios.throughput), limit: '≥ 0.90×', pass: seed.ratios.throughput >= 0.9 },
      { name: 'seed p99 ≤ 1.2× floor (same concurrency)', value: fmt.ratio(seed.ratios.p99), limit: '≤ 1.20×', pass: seed.ratios.p99 <= 1.2 },
      { name: 'seed CPU µs/req ≤ 1.2× floor', value: fmt.ratio(seed.ratios.cpuPerRequest), limit: '≤ 1.20×', pass: seed.ratios.cpuPerRequest <= 1.2 },
    );
  }
  // Peak RSS over the floor's in the same scenario: what our code and heap add to the same stack.
  for (const [name, limitMib] of [['seed', 20], ['large', 30]] as const) {
    const scenario = scenarios.find((candidate) => candidate.name === name);
    if (scenario === undefined) continue;
    const extra = scenario.oursPeakRssBytes - scenario.floorPeakRssBytes;
    targets.push({ name: `${name} peak RSS, ours − floor ≤ +${limitMib} MiB`, value: `${extra >= 0 ? '+' : ''}${fmt.mib(extra)} MiB`, limit: `≤ +${limitMib} MiB`, pass: extra <= limitMib * MIB });
  }
  const errors = (memory?.errors ?? 0) + scenarios.reduce((sum, scenario) => sum + scenario.ours.errors, 0);
  targets.push({ name: 'zero errors (ours, every run)', value: String(errors), limit: '0', pass: errors === 0 });
  const peaks = [...(memory === undefined ? [] : [memory.peakRssBytes]), ...scenarios.map((scenario) => scenario.oursPeakRssBytes)];
  if (peaks.length > 0) {
    const peak = Math.max(...peaks);
    targets.push({ name: 'peak RSS < 150 MiB (ours, every run)', value: `${fmt.mib(peak)} MiB`, limit: '< 150 MiB', pass: peak < 150 * MIB });
  }
  if (memory !== undefined) {
    targets.push({
      name: `RSS after GC, ${memory.samples.at(-1)?.requests} requests within 15% of ${memory.samples[0]?.requests}`,
      value: `${((memory.ratio - 1) * 100).toFixed(1)}%`,
      limit: '±15%',
      pass: Math.abs(memory.ratio - 1) <= 0.15,
    });
  }
  if (cold !== undefined) {
    targets.push(
      { name: 'cold start < 1 s (median)', value: `${cold.medianMs.toFixed(0)} ms`, limit: '< 1000 ms', pass: cold.medianMs < 1000 },
      { name: 'cold start, local, ≤ 1.5× the floor', value: fmt.ratio(cold.ratio), limit: '≤ 1.50×', pass: cold.ratio <= 1.5 },
    );
  }
  if (cluster !== undefined) {
    targets.push(
      { name: 'cold start, cluster, ≤ 2.5× the floor', value: fmt.ratio(cluster.coldStart.ratio), limit: '≤ 2.50×', pass: cluster.coldStart.ratio <= 2.5 },
      { name: 'RSS at rest in a cluster ≤ 80 MiB', value: `${fmt.mib(cluster.ours.rssBytes)} MiB`, limit: '≤ 80 MiB', pass: cluster.ours.rssBytes <= 80 * MIB },
    );
  }
  return targets;
}
