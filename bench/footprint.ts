import { readdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { CLUSTER_NAMESPACE, startBenchCluster } from './cluster.js';
import { errorsOf, median, type AtRest, type ClusterFigures, type ColdStart, type MemoryFlatness, type MemorySample, type ShippedSize } from './figures.js';
import { fmt } from './format.js';
import { certsDir, FLOOR_SCRIPT, GC_FLAGS, load, log, startFloor, startOurs, startOursReady, work, writeBodies } from './harness.js';
import { SETTINGS } from './options.js';
import { MemorySampler, readMemory, ROOT, startServer, type ServerProcess } from './processes.js';
import { seedBody } from './scenarios.js';

/** What the server weighs beyond the load: memory over many requests, cold starts, at rest in a cluster, the bundle's size. */

/**
 * One server, the seed scenario, memory read after the first count of
 * requests and after the last, each time as the load ends and after full
 * GCs: V8 grows its heap lazily, so RSS with garbage in it drifts from run
 * to run; what survives a full GC is what the server holds.
 */
export async function memoryFlatness(): Promise<MemoryFlatness> {
  const bodiesFile = writeBodies('memory', [seedBody]);
  const ours = await startOurs([], GC_FLAGS);
  const sampler = new MemorySampler(ours.pid);
  try {
    const samples: MemorySample[] = [];
    let errors = 0;
    let sent = 0;
    for (const target of SETTINGS.memoryRequests) {
      const result = await load(ours, bodiesFile, 50, { amount: target - sent });
      sent = target;
      errors += errorsOf(result);
      const rssBytes = readMemory(ours.pid).rss;
      const afterGc = await atRest(ours);
      samples.push({ requests: target, rssBytes, afterGc });
      log(`  memory: ${target} requests, RSS ${fmt.mib(rssBytes)} MiB, after a full GC ${fmt.mib(afterGc.rssBytes)} MiB (V8 heap ${fmt.mib(afterGc.heapUsedBytes)} MiB used)`);
    }
    return {
      samples,
      peakRssBytes: sampler.stop().hwm,
      errors,
      ratio: (samples.at(-1)?.afterGc.rssBytes ?? NaN) / (samples[0]?.afterGc.rssBytes ?? NaN),
    };
  } finally {
    sampler.stop();
    await ours.stop();
  }
}

/** The floor's cold start: process start to its listening line (it loads Fastify and listens with TLS). */
async function floorStartMs(): Promise<number> {
  const responseFile = join(work, 'floor-cold-start.json');
  writeFileSync(responseFile, '{}');
  const started = performance.now();
  const floor = await startFloor(responseFile);
  const ms = performance.now() - started;
  await floor.stop();
  return ms;
}

/** Ours (process start to the first `/readyz` 200, certificates already made) and the floor, alternating; medians. */
export async function coldStart(args: readonly string[] = []): Promise<ColdStart> {
  const startsMs: number[] = [];
  const listeningMs: number[] = [];
  const floorMs: number[] = [];
  for (let i = 0; i < SETTINGS.coldStarts; i++) {
    // ABBA, as the load rounds: a drift of the machine falls on both.
    if (i % 2 === 1) floorMs.push(await floorStartMs());
    const { server, listeningMs: listening, readyMs } = await startOursReady(args);
    await server.stop();
    startsMs.push(readyMs);
    listeningMs.push(listening);
    if (i % 2 === 0) floorMs.push(await floorStartMs());
  }
  const medianMs = median(startsMs);
  const floorMedianMs = median(floorMs);
  return { startsMs, medianMs, listeningMedianMs: median(listeningMs), floorMedianMs, ratio: medianMs / floorMedianMs };
}


/** SIGUSR2 to a server started with GC_FLAGS, wait for its memoryUsage line, then its RSS. */
async function atRest(server: ServerProcess): Promise<AtRest> {
  const seen = server.stderr.length;
  process.kill(server.pid, 'SIGUSR2');
  const started = performance.now();
  let line: string | undefined;
  while ((line = server.stderr.slice(seen).find((entry) => entry.startsWith('bench-gc '))) === undefined) {
    if (performance.now() - started > 30_000) throw new Error(`no GC report from pid ${server.pid} within 30 s of SIGUSR2`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  const usage = JSON.parse(line.slice('bench-gc '.length)) as NodeJS.MemoryUsage;
  const memory = readMemory(server.pid);
  return { rssBytes: memory.rss, peakRssBytes: memory.hwm, heapUsedBytes: usage.heapUsed, heapTotalBytes: usage.heapTotal, externalBytes: usage.external };
}

/** The injector following a cluster (both watches open): cold start to ready, and memory at rest after a GC. */
export async function clusterFigures(): Promise<ClusterFigures> {
  const cluster = await startBenchCluster();
  log(`  cluster: ${cluster.kind}`);
  try {
    const args = ['--kubeconfig', cluster.kubeconfigPath, '--namespace', CLUSTER_NAMESPACE];
    const cold = await coldStart(args);
    log(`  cluster cold start: median ${cold.medianMs.toFixed(0)} ms (floor ${cold.floorMedianMs.toFixed(0)} ms)`);
    const { server } = await startOursReady(args, GC_FLAGS);
    const responseFile = join(work, 'floor-at-rest.json');
    writeFileSync(responseFile, '{}');
    const floor = await startServer([...GC_FLAGS, FLOOR_SCRIPT, join(certsDir, 'tls.crt'), join(certsDir, 'tls.key'), responseFile], 'floor serving https');
    try {
      await new Promise((resolve) => setTimeout(resolve, SETTINGS.restSeconds * 1000));
      return { apiServer: cluster.kind, coldStart: cold, restSeconds: SETTINGS.restSeconds, ours: await atRest(server), floor: await atRest(floor) };
    } finally {
      await Promise.all([server.stop(), floor.stop()]);
    }
  } finally {
    await cluster.stop();
  }
}

/** What the image ships: the bundle with every runtime dependency in it (scripts/bundle.ts). */
export function shippedSize(): ShippedSize {
  const files = readdirSync(join(ROOT, 'dist', 'bundle'), { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile());
  const size = (entries: typeof files): number => entries.reduce((sum, entry) => sum + statSync(join(entry.parentPath, entry.name)).size, 0);
  return { bundleBytes: size(files), sourceMapBytes: size(files.filter((entry) => entry.name.endsWith('.map'))) };
}
