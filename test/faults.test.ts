import assert from 'node:assert/strict';
import { connect as netConnect } from 'node:net';
import { after, before, describe, it, type TestContext } from 'node:test';
import type { Agent } from 'node:https';
import type { JsonObject } from '../src/injection/index.js';
import { httpsCall } from './helpers/https-client.js';
import { CallError, keepAliveAgent, postBody, runPool, type PostAnswer } from './helpers/keepalive-client.js';
import { until } from './helpers/injector-harness.js';
import { spawnServer, type ServerProcess } from './helpers/process.js';
import { openTls, parseResponse, rawPost, trickle, watchSocket } from './helpers/raw-tls.js';
import { podReview } from './helpers/reviews.js';
import { makeTestCertificates, startTestServer, type TestCertificates, type TestServer } from './helpers/server.js';
import { startTcpBalancer } from './helpers/tcp-balancer.js';

/**
 * Faults an admission webhook meets in front of every Pod: clients that
 * trickle, floods of connections, replicas restarted under load, a handler
 * that throws. All on loopback, each bounded to a few seconds. Figures are
 * printed as diagnostics (`node --test` shows them).
 */

const HEADERS_TIMEOUT_MS = 3_000;
const REQUEST_TIMEOUT_MS = 4_000;
const CHECK_INTERVAL_MS = 1_000;

let uidCounter = 0;
/** A Pod CREATE annotated for injection, with a uid that says which test sent it. */
function reviewBody(label: string, namespace = 'shop'): { uid: string; body: string } {
  const review = podReview({ namespace, annotations: { 'envoy-injector.io/inject': 'true' } });
  const uid = `${label}-${++uidCounter}`;
  (review['request'] as JsonObject)['uid'] = uid;
  return { uid, body: JSON.stringify(review) };
}

function uidOf(answer: { body: string }): unknown {
  return (JSON.parse(answer.body) as { response?: { uid?: unknown } }).response?.uid;
}

function percentile(values: readonly number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? Number.NaN;
}

const ms = (value: number): string => `${Math.round(value)} ms`;
const sleep = (duration: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, duration));

interface Traffic {
  readonly latencies: number[];
  /** 200 for a right answer (status 200, the request's own uid), else the status. */
  readonly statuses: number[];
  /** performance.now() when each answer arrived. */
  readonly answeredAt: number[];
}

function record(traffic: Traffic, answer: PostAnswer, uid: string): void {
  traffic.latencies.push(answer.ms);
  traffic.statuses.push(answer.status === 200 && uidOf(answer) === uid ? 200 : answer.status);
  traffic.answeredAt.push(performance.now());
}

describe('slow clients are cut off and do not starve others', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server.shutdown();
  });

  /** Reviews sent by `workers` keep-alive clients back to back until `stop` resolves: latencies in ms, and when each answer came. */
  async function normalTraffic(agent: Agent, workers: number, stop: Promise<unknown>, label: string): Promise<Traffic> {
    const traffic: Traffic = { latencies: [], statuses: [], answeredAt: [] };
    let done = false;
    void stop.then(() => (done = true));
    const worker = async (): Promise<void> => {
      while (!done) {
        const { uid, body } = reviewBody(label);
        const answer = await postBody(`${server.url}/mutate`, body, { agent, timeoutMs: 15_000 });
        record(traffic, answer, uid);
      }
    };
    await Promise.all(Array.from({ length: workers }, worker));
    return traffic;
  }

  it('headers or a body trickled a byte every 150 ms: cut off within the timeouts, while others are served at normal latency', async (t) => {
    const agent = keepAliveAgent(server.ca, 4);
    const baseline = await normalTraffic(agent, 4, sleep(1_000), 'baseline');

    // 8 clients trickle headers that never end, 4 send full headers and trickle the body.
    const started = performance.now();
    const slowHeaders = await Promise.all(
      Array.from({ length: 8 }, async () => {
        const socket = await openTls(server.port, server.ca);
        const life = watchSocket(socket);
        trickle(socket, 'POST /mutate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n', 'X-Slow: a\r\n', 150);
        return life;
      }),
    );
    const slowBodies = await Promise.all(
      Array.from({ length: 4 }, async () => {
        const socket = await openTls(server.port, server.ca);
        const life = watchSocket(socket);
        const { body } = reviewBody('slow-body');
        socket.write(rawPost('/mutate', body).slice(0, -body.length));
        trickle(socket, body, ' ', 150);
        return life;
      }),
    );
    const connectMs = performance.now() - started;
    const slowLives = [...slowHeaders, ...slowBodies].map((life) => life.closedAfterMs);
    const allCut = Promise.all(slowLives);
    const firstCutAt = Promise.race(slowLives).then(() => performance.now());
    // And one that opens TCP and never starts TLS: only measured (see the report on issue 6).
    const silent = netConnect({ host: '127.0.0.1', port: server.port });
    silent.on('error', () => {});
    let silentClosedMs: number | undefined;
    silent.once('close', () => (silentClosedMs = performance.now() - started));

    // Meanwhile: keep-alive clients, and a new connection every 200 ms.
    const fresh: Traffic = { latencies: [], statuses: [], answeredAt: [] };
    const freshLoop = (async () => {
      let cut = false;
      void allCut.then(() => (cut = true));
      while (!cut) {
        const { uid, body } = reviewBody('fresh');
        record(fresh, await postBody(`${server.url}/mutate`, body, { agent: false, ca: server.ca, timeoutMs: 15_000 }), uid);
        await sleep(200);
      }
    })();
    const during = await normalTraffic(agent, 4, allCut, 'during');
    await freshLoop;
    agent.destroy();

    const headerLives = await Promise.all(slowHeaders.map((life) => life.closedAfterMs));
    const bodyLives = await Promise.all(slowBodies.map((life) => life.closedAfterMs));
    t.diagnostic(`slow-header sockets lived ${headerLives.map(ms).join(', ')} (headers timeout ${HEADERS_TIMEOUT_MS} ms, checked every ${CHECK_INTERVAL_MS} ms); all ${slowHeaders.length + slowBodies.length} connected in ${ms(connectMs)}`);
    t.diagnostic(`slow-body sockets lived ${bodyLives.map(ms).join(', ')} (request timeout ${REQUEST_TIMEOUT_MS} ms)`);
    t.diagnostic(`the server told them: ${JSON.stringify(slowHeaders[0]?.received().split('\r\n')[0] ?? '')} / ${JSON.stringify(slowBodies[0]?.received().split('\r\n')[0] ?? '')}`);
    t.diagnostic(`others, keep-alive: baseline ${baseline.latencies.length} requests p50 ${ms(percentile(baseline.latencies, 50))} p99 ${ms(percentile(baseline.latencies, 99))}; during ${during.latencies.length} requests p50 ${ms(percentile(during.latencies, 50))} p99 ${ms(percentile(during.latencies, 99))} max ${ms(Math.max(...during.latencies))}`);
    t.diagnostic(
      silentClosedMs === undefined
        ? `a TCP connection that never started TLS was still open after ${ms(performance.now() - started)}: no handshake timeout short of Node's 120 s default, and it counts against --max-connections`
        : `a TCP connection that never started TLS was closed after ${ms(silentClosedMs)}`,
    );
    silent.destroy();
    t.diagnostic(`others, a new TLS connection each: ${fresh.latencies.length} requests p50 ${ms(percentile(fresh.latencies, 50))} max ${ms(Math.max(...fresh.latencies))}`);

    // Cut off: within the timeout, plus one check interval, plus 2 s for noticing and closing, which
    // take a few ms here (the lives above): a machine 5x slower still closes well inside the slack.
    for (const life of headerLives) assert.ok(life <= HEADERS_TIMEOUT_MS + CHECK_INTERVAL_MS + 2_000, `a slow-header socket lived ${ms(life)}`);
    for (const life of bodyLives) assert.ok(life <= REQUEST_TIMEOUT_MS + CHECK_INTERVAL_MS + 2_000, `a slow-body socket lived ${ms(life)}`);
    for (const life of slowBodies) assert.match(life.received(), /^HTTP\/1\.1 408 /, 'the slow body is told 408');
    // Not starved: everyone else got right answers, some while every slow client was still connected
    // (not only once they were cut), and nobody waited as long as a slow client is allowed to hold on.
    assert.deepEqual([...new Set([...during.statuses, ...fresh.statuses])], [200]);
    const cutAt = await firstCutAt;
    assert.ok(during.answeredAt.some((at) => at < cutAt), 'no keep-alive request was answered while the slow clients were all connected');
    assert.ok(fresh.answeredAt.some((at) => at < cutAt), 'no new connection was answered while the slow clients were all connected');
    const slowest = Math.max(...during.latencies, ...fresh.latencies);
    assert.ok(slowest < HEADERS_TIMEOUT_MS, `a request waited ${ms(slowest)}, as long as the slow clients' timeout`);
  });
});

describe('500 concurrent connections', () => {
  const CONNECTIONS = 500;
  let server: TestServer;
  before(async () => {
    // Timeouts far above what 500 handshakes take even on a slow, busy machine: this test is about
    // holding and answering many connections at once; cutting slow ones off is tested above.
    server = await startTestServer({ timeouts: { requestMs: 120_000, headersMs: 120_000, keepAliveMs: 100_000 } });
  });
  after(async () => {
    await server.shutdown();
  });

  it('500 TLS connections all held open before any request is sent, then each review answered 200 with its own uid', { timeout: 180_000 }, async (t) => {
    let open = 0;
    let peak = 0;
    server.app.server.on('connection', (socket: import('node:net').Socket) => {
      open += 1;
      peak = Math.max(peak, open);
      socket.once('close', () => (open -= 1));
    });

    const started = performance.now();
    const connections = await Promise.all(
      Array.from({ length: CONNECTIONS }, async () => {
        const socket = await openTls(server.port, server.ca);
        return { socket, life: watchSocket(socket, started) };
      }),
    );
    const connectMs = performance.now() - started;
    // The server accepts a connection before its handshake can end: all 500 are open on its side now.
    assert.equal(open, CONNECTIONS, `the server holds ${open} of the ${CONNECTIONS} connections the client holds`);
    assert.ok(connections.every(({ life }) => life.received() === ''), 'nothing was answered before a request was sent');

    const answers = connections.map(async ({ socket, life }) => {
      const { uid, body } = reviewBody('wide');
      socket.end(rawPost('/mutate', body));
      await life.closedAfterMs;
      return { uid, response: parseResponse(life.received()) };
    });
    const results = await Promise.all(answers);
    t.diagnostic(`${CONNECTIONS} TLS connections open in ${ms(connectMs)}; server peak ${peak} open; all answered ${ms(performance.now() - started)} after the first connect`);

    const wrong = results.filter(({ uid, response }) => response.status !== 200 || uidOf(response) !== uid);
    assert.deepEqual(wrong.map(({ response }) => `${response.status} ${response.body.slice(0, 100)}`), []);
    assert.equal(results.length, CONNECTIONS);
    assert.equal((await httpsCall(`${server.url}/healthz`, { ca: server.ca })).status, 200);
  });
});

describe('an exception in a handler', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer({
      namespaceLabels: async (namespace) => {
        if (namespace === 'boom-sync') throw new Error('lookup exploded with token s3cr3t');
        if (namespace === 'boom-async') return Promise.reject(new TypeError('lookup rejected with token s3cr3t'));
        return { 'envoy-injector.io/inject': 'enabled' };
      },
    });
  });
  after(async () => {
    await server.shutdown();
  });

  it('answers 500 with a generic message for that request only; the others, meanwhile and after, get 200', async (t) => {
    const agent = keepAliveAgent(server.ca, 8);
    const namespaces = Array.from({ length: 120 }, (_, i) => (i % 6 === 0 ? 'boom-sync' : i % 6 === 3 ? 'boom-async' : 'shop'));
    const answers = await runPool(namespaces, 8, async (namespace) => {
      const { uid, body } = reviewBody('handler', namespace);
      return { namespace, uid, answer: await postBody(`${server.url}/mutate`, body, { agent, timeoutMs: 10_000 }) };
    });
    agent.destroy();
    const broken = answers.filter(({ namespace }) => namespace.startsWith('boom'));
    const fine = answers.filter(({ namespace }) => !namespace.startsWith('boom'));
    for (const { answer } of broken) {
      assert.equal(answer.status, 500);
      assert.deepEqual(JSON.parse(answer.body), { statusCode: 500, error: 'Internal Server Error', message: 'internal error (logged by envoy-injector)' });
      assert.ok(!answer.body.includes('s3cr3t'), 'the error itself stays in the log');
    }
    for (const { uid, answer } of fine) {
      assert.equal(answer.status, 200, answer.body);
      assert.equal(uidOf(answer), uid);
    }
    // Logged for the operator, once per failed request, with the error.
    const errors = server.log.lines.filter((line) => line['level'] === 50 && line['msg'] === 'request failed');
    assert.equal(errors.length, broken.length);
    assert.ok(errors.every((line) => /lookup (exploded|rejected)/.test(String((line['err'] as { message?: string } | undefined)?.message))));
    const metrics = await server.metrics.registry.getSingleMetricAsString('envoy_injector_admission_requests_total');
    assert.match(metrics, new RegExp(`result="error",reason="internal_error"\\} ${broken.length}\\b`));
    assert.equal((await httpsCall(`${server.url}/healthz`, { ca: server.ca })).status, 200, 'still serving');
    t.diagnostic(`${broken.length} requests answered 500 (thrown and rejected lookups), ${fine.length} answered 200 meanwhile`);
  });
});

// ---------------------------------------------------------------------------------------------
// Two replicas, one killed (SIGTERM) and restarted under a steady stream of reviews.

interface Outcome {
  readonly uid: string;
  /** performance.now() when it was sent. */
  readonly sentAt: number;
  answer?: PostAnswer;
  error?: CallError;
  /** Connects refused by a replica that was down, and retried on the other one. */
  refusedRetries: number;
}

/** The uids each process decided (log level debug writes one line per admission), counted. */
function decidedUids(processes: readonly ServerProcess[]): Map<string, number> {
  const seen = new Map<string, number>();
  for (const replica of processes) {
    for (const line of replica.logs) if (typeof line['uid'] === 'string') seen.set(line['uid'], (seen.get(line['uid']) ?? 0) + 1);
  }
  return seen;
}

/** If a test fails half-way, no replica outlives it (and keeps the test process waiting). */
function killAll(processes: readonly ServerProcess[]): void {
  for (const replica of processes) if (replica.child.exitCode === null && replica.child.signalCode === null) replica.child.kill('SIGKILL');
}

async function spawnReplica(certs: TestCertificates, shutdownDelay: string, port?: number): Promise<ServerProcess> {
  return spawnServer([
    '--tls-cert', certs.certFile,
    '--tls-key', certs.keyFile,
    '--log-level', 'debug',
    '--shutdown-delay', shutdownDelay,
    ...(port === undefined ? [] : ['--port', String(port)]),
  ]);
}

/**
 * Sends a review every `everyMs` through `send` while `scenario` runs, then
 * waits for every answer.
 */
async function steadyStream(everyMs: number, send: (outcome: Outcome, body: string) => Promise<void>, scenario: () => Promise<void>): Promise<Outcome[]> {
  const outcomes: Outcome[] = [];
  const pending: Promise<void>[] = [];
  const timer = setInterval(() => {
    const { uid, body } = reviewBody('stream');
    const outcome: Outcome = { uid, sentAt: performance.now(), refusedRetries: 0 };
    outcomes.push(outcome);
    pending.push(send(outcome, body));
  }, everyMs);
  try {
    await scenario();
  } finally {
    clearInterval(timer);
  }
  await Promise.all(pending);
  return outcomes;
}

function report(t: TestContext, name: string, outcomes: readonly Outcome[], retried: number, extra: string): void {
  const answered = outcomes.filter((o) => o.answer?.status === 200).length;
  t.diagnostic(`${name}: sent ${outcomes.length}, answered 200 ${answered}, retried after ECONNREFUSED ${retried}, failed ${outcomes.length - answered}; ${extra}`);
}

describe('a replica killed and restarted under load', () => {
  let certs: TestCertificates;
  before(async () => {
    certs = await makeTestCertificates();
  });

  it('endpoint routing (the client follows readiness, as the Service endpoints do), --shutdown-delay 1s: every request answered 200', async (t) => {
    const replicas = await Promise.all([spawnReplica(certs, '1s'), spawnReplica(certs, '1s')]);
    let [a, b] = replicas as [ServerProcess, ServerProcess];
    const aPort = a.port;
    const processes = [a, b];
    t.after(() => killAll(processes));
    const endpoints = [
      { port: a.port, agent: keepAliveAgent(certs.ca, 4), ready: true },
      { port: b.port, agent: keepAliveAgent(certs.ca, 4), ready: true },
    ];
    // Readiness probes every 100 ms decide which replicas get new requests.
    let probing = true;
    const probes = (async () => {
      while (probing) {
        await Promise.all(
          endpoints.map(async (endpoint) => {
            endpoint.ready = await httpsCall(`https://127.0.0.1:${endpoint.port}/readyz`, { ca: certs.ca }).then(
              (answer) => answer.status === 200,
              () => false,
            );
          }),
        );
        await sleep(100);
      }
    })();
    let next = 0;
    const send = async (outcome: Outcome, body: string): Promise<void> => {
      for (let attempt = 0; attempt < 4; attempt++) {
        const ready = endpoints.filter((endpoint) => endpoint.ready);
        const endpoint = (ready.length > 0 ? ready : endpoints)[next++ % Math.max(1, ready.length || endpoints.length)];
        if (endpoint === undefined) break;
        try {
          outcome.answer = await postBody(`https://127.0.0.1:${endpoint.port}/mutate`, body, { agent: endpoint.agent, timeoutMs: 10_000 });
          return;
        } catch (error) {
          if (error instanceof CallError && error.code === 'ECONNREFUSED') {
            outcome.refusedRetries += 1;
            continue;
          }
          outcome.error = error as CallError;
          return;
        }
      }
    };

    let exitMs = 0;
    let restartMs = 0;
    const outcomes = await steadyStream(4, send, async () => {
      await sleep(1_200);
      const term = performance.now();
      a.child.kill('SIGTERM');
      assert.equal(await a.exited, 0, 'graceful exit');
      exitMs = performance.now() - term;
      a = await spawnReplica(certs, '1s', aPort);
      processes.push(a);
      restartMs = performance.now() - term;
      // Back in rotation once its readiness is probed: waited for, not assumed after a fixed time.
      const restarted = a;
      await until('the restarted replica to decide a review', () => (restarted.logs.some((line) => typeof line['uid'] === 'string') ? true : undefined), 30_000);
      await sleep(300);
    });
    probing = false;
    await probes;
    for (const endpoint of endpoints) endpoint.agent.destroy();

    const decided = decidedUids(processes);
    const byProcess = processes.map((replica) => replica.logs.filter((line) => typeof line['uid'] === 'string').length);
    report(t, 'endpoint routing', outcomes, outcomes.filter((o) => o.refusedRetries > 0).length, `SIGTERM to exit ${ms(exitMs)}, to restarted ${ms(restartMs)}; decided per process (A, B, A again): ${byProcess.join(', ')}`);
    for (const replica of processes.slice(1)) replica.child.kill('SIGTERM');
    await Promise.all(processes.map((replica) => replica.exited));

    const failed = outcomes.filter((o) => o.answer?.status !== 200);
    assert.deepEqual(failed.map((o) => `${o.uid}: ${o.answer?.status ?? o.error?.code} ${o.error?.message ?? ''} reused=${o.error?.reusedSocket}`), []);
    for (const o of outcomes) assert.equal(uidOf(o.answer as PostAnswer), o.uid);
    assert.ok([...decided.values()].every((count) => count === 1), 'no review decided twice');
  });

  it('connection balancing (a ClusterIP-like TCP balancer, blind to readiness), --shutdown-delay 2s as the chart sets it: no accepted request lost; refused connects retried; close races counted', async (t) => {
    const replicas = await Promise.all([spawnReplica(certs, '2s'), spawnReplica(certs, '2s')]);
    let [a, b] = replicas as [ServerProcess, ServerProcess];
    const aPort = a.port;
    const processes = [a, b];
    t.after(() => killAll(processes));
    const balancer = await startTcpBalancer(() => [aPort, b.port]);
    const agent = keepAliveAgent(certs.ca, 8);
    // Most requests reuse connections (as one API server does); every fourth opens its own (as other API servers, or a new pool, do).
    let count = 0;
    let resetBeforeTls = 0;
    const send = async (outcome: Outcome, body: string): Promise<void> => {
      const fresh = ++count % 4 === 0;
      for (let attempt = 0; attempt < 3; attempt++) {
        try {
          outcome.answer = await postBody(`https://127.0.0.1:${balancer.port}/mutate`, body, fresh ? { agent: false, ca: certs.ca, timeoutMs: 10_000 } : { agent, timeoutMs: 10_000 });
          return;
        } catch (error) {
          outcome.error = error as CallError;
          // Reset before the TLS handshake ended: the request never left the client, so it is as safe to retry as a refused connect.
          if (!/before secure TLS connection was established/.test(outcome.error.message)) return;
          resetBeforeTls += 1;
        }
      }
    };

    const terms: number[] = [];
    const outcomes = await steadyStream(3, send, async () => {
      // Three kills: each one meets connections open to A, reused ones and new ones.
      for (let round = 0; round < 3; round++) {
        await sleep(700);
        terms.push(performance.now());
        a.child.kill('SIGTERM');
        assert.equal(await a.exited, 0, 'graceful exit');
        a = await spawnReplica(certs, '0s', aPort);
        processes.push(a);
        // Each kill must meet connections to a serving A: wait until the balancer has brought it one.
        const restarted = a;
        await until(`restarted replica A (round ${round + 1}) to decide a review`, () => (restarted.logs.some((line) => typeof line['uid'] === 'string') ? true : undefined), 30_000);
      }
      await sleep(700);
    });
    agent.destroy();
    await balancer.close();
    const byProcess = processes.map((replica) => replica.logs.filter((line) => typeof line['uid'] === 'string').length);
    for (const replica of [a, b]) replica.child.kill('SIGTERM');
    await Promise.all(processes.map((replica) => replica.exited));

    const decided = decidedUids(processes);
    const failed = outcomes.filter((o) => o.answer?.status !== 200);
    // The close race: a request written into a connection (reused, or new and not yet read from) that the
    // closing server reset, as idle, before reading it. Not accepted, but the client cannot know that.
    const raced = failed.filter((o) => o.error?.code === 'ECONNRESET' && o.error.responseStarted === false && !decided.has(o.uid));
    report(t, 'connection balancing', outcomes, balancer.refusedRetries, `(connects, by the balancer) and ${resetBeforeTls} reset before TLS (by the client); decided per process (A, B, then A restarted each time): ${byProcess.join(', ')}`);
    const sinceTerm = (o: Outcome): string => {
      const term = terms.filter((at) => at <= o.sentAt + 50).pop();
      const reuse = o.error?.reusedSocket === true ? 'reused' : 'new';
      return term === undefined ? `${reuse}, ${ms(o.sentAt - (terms[0] ?? 0))} from the first SIGTERM` : `${reuse} connection, ${ms(o.sentAt - term)} from SIGTERM ${terms.indexOf(term) + 1}`;
    };
    t.diagnostic(
      `close race: ${raced.length} request(s) of ${outcomes.length} reset before any response byte and never seen by any replica, in ${terms.length} kills` +
        (raced.length === 0 ? '' : ` (issued on a ${raced.map(sinceTerm).join('; ')})`),
    );

    // Every request a replica accepted was answered 200, once.
    const lostAfterAccept = outcomes.filter((o) => decided.has(o.uid) && o.answer?.status !== 200);
    assert.deepEqual(lostAfterAccept.map((o) => `${o.uid}: ${o.answer?.status ?? o.error?.code}`), []);
    assert.ok([...decided.values()].every((decisions) => decisions === 1), 'no review decided twice');
    // Nothing failed but the race above: no 5xx, no reset after a response began, no refused connect reaching the client.
    assert.deepEqual(failed.filter((o) => !raced.includes(o)).map((o) => `${o.uid}: ${o.answer?.status ?? `${o.error?.code} ${o.error?.message} reused=${o.error?.reusedSocket}`}`), []);
    assert.equal(balancer.unserved, 0);
    assert.ok(balancer.refusedRetries > 0, 'connects were refused while A was down, and retried');
    for (const o of outcomes.filter((o) => o.answer !== undefined)) assert.equal(uidOf(o.answer as PostAnswer), o.uid);
  });
});

// ---------------------------------------------------------------------------------------------
// Weaknesses these fault tests found, fixed in src/; kept as regressions.

describe('regressions: weaknesses found by the fault tests', () => {
  it('a TCP connection that never starts TLS is closed within the headers timeout, plus one check interval and slack', async () => {
    const server = await startTestServer();
    try {
      const started = performance.now();
      const socket = netConnect({ host: '127.0.0.1', port: server.port });
      socket.on('error', () => {});
      const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(performance.now() - started)));
      const limit = HEADERS_TIMEOUT_MS + CHECK_INTERVAL_MS + 1_500;
      const heldMs = await Promise.race([closed, sleep(limit).then(() => Number.POSITIVE_INFINITY)]);
      socket.destroy();
      assert.ok(heldMs <= limit, `still open after ${ms(limit)} (Node's TLS handshakeTimeout defaults to 120 s)`);
    } finally {
      await server.shutdown();
    }
  });

  it('while draining (--shutdown-delay), answers tell keep-alive clients to close, so none is reusing a connection when idle ones are closed', async () => {
    const server = await startTestServer({ shutdownDelayMs: 1_000 });
    const agent = keepAliveAgent(server.ca, 1);
    try {
      const before = await postBody(`${server.url}/mutate`, reviewBody('drain').body, { agent });
      assert.equal(before.headers['connection'], 'keep-alive');
      const stopping = server.shutdown();
      const during = await postBody(`${server.url}/mutate`, reviewBody('drain').body, { agent });
      assert.equal(during.status, 200);
      assert.equal(during.reusedSocket, true);
      assert.equal(during.headers['connection'], 'close', 'a draining server answers with Connection: close');
      await stopping;
    } finally {
      agent.destroy();
      await server.shutdown();
    }
  });
});
