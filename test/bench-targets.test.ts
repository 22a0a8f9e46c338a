import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { ApiServerFigures, PathFigures } from '../bench/cluster-latency.js';
import { cpuPerPod, zeroCpu } from '../bench/cluster-cpu.js';
import type { PathName } from '../bench/cluster-paths.js';
import { cpuRatioByRound, type ClusterFigures, type Round, type ScenarioResult, type ServerFigures } from '../bench/figures.js';
import { MIB } from '../bench/format.js';
import { apiServerTargets, evaluateTargets, type Target } from '../bench/targets.js';

const server = (errors = 0): ServerFigures => ({ requestsPerSecond: 1000, cpuUsPerRequest: 100, p50Ms: 1, p99Ms: 2, maxMs: 3, errors, rounds: [] });

function scenario(name: string, ratios: ScenarioResult['ratios'], peakMib = 90): ScenarioResult {
  return {
    name,
    description: name,
    connections: 50,
    mode: 'test',
    requestBytes: 1,
    responseBytes: 1,
    ours: server(),
    floor: server(),
    oursPeakRssBytes: peakMib * MIB,
    floorPeakRssBytes: peakMib * MIB,
    ratios,
    cpuRatioByRound: { lowest: ratios.cpuPerRequest, highest: ratios.cpuPerRequest },
    otherCpu: { mean: 0, max: 0 },
  };
}

function cluster(restMib: number): ClusterFigures {
  const rest = { rssBytes: restMib * MIB, peakRssBytes: 90 * MIB, heapUsedBytes: 0, heapTotalBytes: 0, externalBytes: 0 };
  return { apiServer: 'test', coldStart: { startsMs: [500], medianMs: 500, listeningMedianMs: 400, floorMedianMs: 400, ratio: 1.25 }, restSeconds: 60, ours: rest, floor: rest };
}

const verdicts = (targets: readonly Target[]): Record<string, boolean> => Object.fromEntries(targets.map((target) => [target.name, target.pass]));

describe('bench: the targets of issue 39', () => {
  it('judges the seed against 0.8× throughput, 1.3× p99 and CPU, limits included', () => {
    const at = verdicts(evaluateTargets([scenario('seed', { throughput: 0.8, p99: 1.3, cpuPerRequest: 1.3 })], undefined, undefined, undefined));
    assert.deepEqual(
      Object.entries(at).filter(([name]) => name.startsWith('seed ') && !name.includes('RSS')),
      [
        ['seed throughput ≥ 0.8× floor', true],
        ['seed p99 ≤ 1.3× floor (same concurrency)', true],
        ['seed CPU µs/req ≤ 1.3× floor', true],
      ],
    );
    const past = verdicts(evaluateTargets([scenario('seed', { throughput: 0.79, p99: 1.31, cpuPerRequest: 1.31 })], undefined, undefined, undefined));
    assert.equal(past['seed throughput ≥ 0.8× floor'], false);
    assert.equal(past['seed p99 ≤ 1.3× floor (same concurrency)'], false);
    assert.equal(past['seed CPU µs/req ≤ 1.3× floor'], false);
  });

  it('judges the skip path\'s CPU against 1.1× the floor\'s, and only when it ran', () => {
    const skip = (cpuPerRequest: number) => verdicts(evaluateTargets([scenario('skip', { throughput: 1, p99: 1, cpuPerRequest })], undefined, undefined, undefined))['skip CPU µs/req ≤ 1.1× floor'];
    assert.equal(skip(1.1), true);
    assert.equal(skip(1.11), false);
    assert.equal(verdicts(evaluateTargets([scenario('seed', { throughput: 1, p99: 1, cpuPerRequest: 1 })], undefined, undefined, undefined))['skip CPU µs/req ≤ 1.1× floor'], undefined);
  });

  it('pairs each of ours\' rounds with the floor\'s next to it, and prints their range beside the CPU ratio', () => {
    const rounds = (cpu: readonly number[]): Round[] => cpu.map((cpuUsPerRequest) => ({ cpuUsPerRequest }) as Round);
    // ABBA: ours 1, floor 1, floor 2, ours 2, ...: the i-th of each ran side by side.
    const spread = cpuRatioByRound(rounds([120, 150, 110, 130]), rounds([100, 100, 110, 100]));
    assert.deepEqual(spread, { lowest: 1, highest: 1.5 });
    const seed = { ...scenario('seed', { throughput: 1, p99: 1, cpuPerRequest: 1.25 }), cpuRatioByRound: spread };
    const cpu = evaluateTargets([seed], undefined, undefined, undefined).find((target) => target.name === 'seed CPU µs/req ≤ 1.3× floor');
    assert.equal(cpu?.value, '1.25× (rounds 1.00–1.50×)');
    assert.equal(cpu?.pass, true);
  });

  it('holds every run, the ~1 MiB Pod\'s included, under 150 MiB of peak RSS and names the highest', () => {
    const even = { throughput: 1, p99: 1, cpuPerRequest: 1 };
    const targets = evaluateTargets([scenario('seed', even, 95), scenario('large', even, 165)], undefined, undefined, undefined);
    const peak = targets.find((target) => target.name.startsWith('peak RSS < 150 MiB'));
    assert.equal(peak?.pass, false);
    assert.equal(peak?.value, '165.0 MiB (large)');
    assert.equal(evaluateTargets([scenario('large', even, 149.9)], undefined, undefined, undefined).find((target) => target.name.startsWith('peak RSS < 150 MiB'))?.pass, true);
  });

  it('holds RSS at rest in a cluster to 72 MiB', () => {
    const rest = (mib: number) => verdicts(evaluateTargets([], undefined, undefined, cluster(mib)))['RSS at rest in a cluster ≤ 72 MiB'];
    assert.equal(rest(72), true);
    assert.equal(rest(72.1), false);
    // Issue 27's looser targets are gone.
    const names = evaluateTargets([scenario('seed', { throughput: 1, p99: 1, cpuPerRequest: 1 })], undefined, undefined, cluster(70)).map((target) => target.name);
    assert.ok(!names.some((name) => name.includes('0.9×') || name.includes('80 MiB')), names.join('; '));
  });
});

function path(name: PathName, p50Ms: number, apiServerMsPerPod: number, calls?: number): PathFigures {
  return {
    path: name,
    description: name,
    pods: 100,
    refused: 0,
    p50Ms,
    p90Ms: p50Ms * 2,
    p99Ms: p50Ms * 3,
    podsPerSecond: 100,
    webhookCalls: calls === undefined ? undefined : { count: calls, meanMs: 1 },
    deploymentSeconds: undefined,
    cpu: cpuPerPod({ ...zeroCpu(), 'kube-apiserver': apiServerMsPerPod / 10 }, 100),
  };
}

function apiServer(policy: { p50Ms: number; apiServerMs: number }): ApiServerFigures {
  return {
    apiServer: 'test',
    settings: { kubeVersion: '1.34', podsPerPath: 100, rounds: 1, clients: 1, replicas: 0 },
    paths: [path('none', 10, 2), path('floor', 20, 4, 100), path('webhook', 20, 4, 100), path('policy', policy.p50Ms, policy.apiServerMs), path('constant', 20, 5)],
    refusals: [],
  };
}

describe('bench: policy mode against a constant policy (issue 39)', () => {
  it('judges policy mode at p50 and in the API server\'s CPU per Pod against 1.10× the constant policy, no longer against no injection', () => {
    const at = verdicts(apiServerTargets(apiServer({ p50Ms: 22, apiServerMs: 5.5 })));
    assert.equal(at['Pod CREATE p50, policy mode / constant policy'], true);
    assert.equal(at['kube-apiserver CPU per Pod, policy mode / constant policy'], true);
    assert.equal(at['Pod CREATE p50, policy mode / no injection'], undefined);
    const past = verdicts(apiServerTargets(apiServer({ p50Ms: 22.1, apiServerMs: 5.6 })));
    assert.equal(past['Pod CREATE p50, policy mode / constant policy'], false);
    assert.equal(past['kube-apiserver CPU per Pod, policy mode / constant policy'], false);
    assert.equal(past['webhook calls per injected Pod (chart defaults)'], true);
  });

  it('judges nothing when a path is missing', () => {
    const figures = apiServer({ p50Ms: 20, apiServerMs: 5 });
    assert.deepEqual(apiServerTargets({ ...figures, paths: figures.paths.filter((entry) => entry.path !== 'constant') }), []);
  });
});
