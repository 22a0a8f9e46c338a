import assert from 'node:assert/strict';
import { afterEach, describe, it } from 'node:test';
import { KubeConfig } from '@kubernetes/client-node';
import { apiServerSilence, StreamLiveness, type WatchLiveness } from '../src/kube/api/stream-liveness.js';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { until } from './helpers/injector-harness.js';

/** A check the test answers: each call waits until `answer` is called. */
function heldCheck(): { check: () => Promise<string | undefined>; calls: number; answer(silence: string | undefined): void } {
  const waiting: ((silence: string | undefined) => void)[] = [];
  const held = {
    calls: 0,
    check: () => {
      held.calls += 1;
      return new Promise<string | undefined>((resolve) => waiting.push(resolve));
    },
    answer: (silence: string | undefined) => waiting.shift()?.(silence),
  };
  return held;
}

describe('StreamLiveness: a quiet stream is checked, a dead one given up', () => {
  let liveness: StreamLiveness | undefined;
  afterEach(() => liveness?.stop());
  const timings: WatchLiveness = { quietMs: 30, checkTimeoutMs: 1_000, streamSeconds: 300 };

  const start = (check: () => Promise<string | undefined>, options: { timeoutSeconds?: number; liveness?: WatchLiveness } = {}) => {
    const seen = { answered: [] as number[], dead: [] as string[] };
    liveness = new StreamLiveness({
      liveness: options.liveness ?? timings,
      timeoutSeconds: options.timeoutSeconds ?? 300,
      check,
      answered: (quietMs) => seen.answered.push(quietMs),
      dead: (reason) => seen.dead.push(reason),
    });
    liveness.start();
    return seen;
  };

  it('after quietMs without an event it checks; answered, it keeps the stream and checks again, the silence growing', async () => {
    const held = heldCheck();
    const seen = start(held.check);
    await until('a first check', () => (held.calls === 1 ? true : undefined));
    held.answer(undefined);
    await until('a second check', () => (held.calls === 2 ? true : undefined));
    held.answer(undefined);
    await until('two answers', () => (seen.answered.length === 2 ? true : undefined));
    assert.deepEqual(seen.dead, []);
    assert.ok((seen.answered[0] ?? 0) >= timings.quietMs - 5 && (seen.answered[1] ?? 0) >= 2 * timings.quietMs - 5, `${seen.answered}`);
  });

  it('a failed check gives the stream up, saying how long it was silent and why the check failed', async () => {
    const held = heldCheck();
    const seen = start(held.check);
    await until('a check', () => (held.calls === 1 ? true : undefined));
    held.answer('GET /version: no answer within 1000 ms');
    await until('given up', () => (seen.dead.length === 1 ? true : undefined));
    assert.match(seen.dead[0] ?? '', /^no event or bookmark for \d+ ms, and a check of the API server failed \(GET \/version: no answer within 1000 ms\): the stream is presumed dead/);
  });

  it('an event that arrives while a check is under way wins over the check\'s failure', async () => {
    const held = heldCheck();
    const seen = start(held.check);
    await until('a check', () => (held.calls === 1 ? true : undefined));
    liveness?.event();
    held.answer('GET /version: no answer within 1000 ms');
    await until('the next check, after the event', () => (held.calls === 2 ? true : undefined));
    assert.deepEqual(seen.dead, []);
  });

  it('a stream still open quietMs past the timeout it asked for is given up, whatever the checks say', async () => {
    const seen = start(async () => undefined, { timeoutSeconds: 0, liveness: { ...timings, quietMs: 50 } });
    await until('given up', () => (seen.dead.length === 1 ? true : undefined));
    assert.match(seen.dead[0] ?? '', /^the stream outlived the 0 s timeout it asked of the API server by 50 ms/);
  });
});

describe('apiServerSilence: does the API server answer?', () => {
  let fake: FakeApiServer | undefined;
  afterEach(async () => fake?.close());
  const configOf = (server: FakeApiServer): KubeConfig => {
    const config = new KubeConfig();
    config.loadFromFile(server.writeKubeconfig());
    return config;
  };

  it('any answer below 500 is an answer (a 403 too); a 5xx or no answer within the timeout is not', async () => {
    fake = await FakeApiServer.start();
    const config = configOf(fake);
    assert.equal(await apiServerSilence(config, 2_000), undefined);
    fake.failNext(1, 403, (path) => path === '/version');
    assert.equal(await apiServerSilence(config, 2_000), undefined);
    fake.failNext(1, 503, (path) => path === '/version');
    assert.match((await apiServerSilence(config, 2_000)) ?? '', /^HTTP 503/);
    fake.stall((path) => path === '/version');
    assert.equal(await apiServerSilence(config, 200), 'GET /version: no answer within 200 ms');
  });
});
