/**
 * The load generator, run in its own process by bench/run.ts so that it never
 * shares an event loop with a server:
 *   node --import tsx bench/load.ts SPEC.json
 * Drives one URL with autocannon (keep-alive over TLS) and prints one JSON
 * line, a LoadResult, on stdout. Latencies are recorded here per response
 * (autocannon's hrtime-based float milliseconds) so that percentiles keep
 * sub-millisecond precision.
 */
import { readFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import autocannon, { type Result } from 'autocannon';

export interface LoadSpec {
  readonly url: string;
  /** The CA of the serving certificate (see the note on tlsOptions below). */
  readonly caFile: string;
  /** Newline-delimited request bodies (compact JSON, one per line); cycled over, one per request. */
  readonly bodiesFile: string;
  readonly connections: number;
  /** Either a duration in seconds or a fixed amount of requests. */
  readonly durationSeconds?: number;
  readonly amount?: number;
}

export interface LoadResult {
  /** Responses received (any status). */
  readonly responses: number;
  readonly non2xx: number;
  /** Socket errors and timeouts, as autocannon counts them. */
  readonly socketErrors: number;
  readonly timeouts: number;
  /** From the first connection attempt to the last response. */
  readonly elapsedSeconds: number;
  readonly requestsPerSecond: number;
  readonly latencyMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number; readonly mean: number };
  readonly statusCodes: Record<string, number>;
  /** CPU this worker process used (user + system, startup included), seconds. */
  readonly cpuSeconds: number;
}

function percentile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] ?? NaN;
}

async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const bodies = readFileSync(spec.bodiesFile, 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => Buffer.from(line));
  const first = bodies[0];
  if (first === undefined) throw new Error(`${spec.bodiesFile}: no request body`);
  let next = 0;
  const latencies: number[] = [];
  const statusCodes: Record<string, number> = {};
  const started = performance.now();
  let lastResponse = started;

  const result = await new Promise<Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        ...(spec.amount === undefined ? { duration: spec.durationSeconds ?? 5 } : { amount: spec.amount }),
        timeout: 10,
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        // autocannon 9 passes these to tls.connect but then forces
        // rejectUnauthorized: false (lib/httpClient.js), so the CA is not
        // enforced here; bench/run.ts checks the chain with node:https first.
        tlsOptions: { ca: readFileSync(spec.caFile) },
        ...(bodies.length === 1
          ? { body: first }
          : {
              // Distinct bodies (uids): each request takes the next one.
              requests: [{ setupRequest: (request) => ({ ...request, body: bodies[next++ % bodies.length] ?? first }) }],
            }),
      },
      (error, done) => (error === null ? resolve(done) : reject(error)),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTimeMs) => {
      latencies.push(responseTimeMs);
      statusCodes[statusCode] = (statusCodes[statusCode] ?? 0) + 1;
      lastResponse = performance.now();
    });
  });

  const sorted = Float64Array.from(latencies).sort();
  // A timed run ends on its clock; a fixed amount ends with its last response.
  const elapsedSeconds = (spec.amount === undefined ? performance.now() - started : lastResponse - started) / 1000;
  const sum = latencies.reduce((total, value) => total + value, 0);
  return {
    responses: latencies.length,
    non2xx: result.non2xx,
    socketErrors: result.errors,
    timeouts: result.timeouts,
    elapsedSeconds,
    requestsPerSecond: latencies.length / elapsedSeconds,
    latencyMs: {
      p50: percentile(sorted, 50),
      p90: percentile(sorted, 90),
      p99: percentile(sorted, 99),
      max: sorted[sorted.length - 1] ?? NaN,
      mean: latencies.length === 0 ? NaN : sum / latencies.length,
    },
    statusCodes,
    cpuSeconds: (process.cpuUsage().user + process.cpuUsage().system) / 1e6,
  };
}

// A script, not a library: run.ts only imports its types (erased at compile time).
const specFile = process.argv[2];
if (specFile === undefined) {
  process.stderr.write('usage: node --import tsx bench/load.ts SPEC.json\n');
  process.exit(2);
}
const spec = JSON.parse(readFileSync(specFile, 'utf8')) as LoadSpec;
process.stdout.write(`${JSON.stringify(await runLoad(spec))}\n`);
