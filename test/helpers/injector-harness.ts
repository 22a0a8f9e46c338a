import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { parseServeArgs, startInjector, type RunningInjector } from '../../src/commands/serve.js';
import type { FakeApiServer } from './fake-api-server.js';
import { httpsCall } from './https-client.js';
import { decodeReview, podReview, type DecodedReview } from './reviews.js';
import { captureLog, type CapturedLog } from './server.js';

/** The injector's namespace in these tests. */
export const NAMESPACE = 'envoy-injector';
const silentIo = { stdin: Readable.from([]), stdout: { write: () => true }, stderr: { write: () => true } };

/**
 * Polls `probe` until it gives a value. The bound only matters on failure, so it is generous: what
 * takes a second on a busy machine must still arrive on one five times slower.
 */
export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

export interface Harness {
  readonly fake: FakeApiServer;
  readonly injector: RunningInjector;
  readonly log: CapturedLog;
  readonly url: string;
  readonly ca: string;
  review(options: Parameters<typeof podReview>[0]): Promise<DecodedReview>;
  readiness(): Promise<{ status: number; body: { ready: boolean; staleSeconds?: number; checks: { template: string }; problems: string[] } }>;
}

/** The whole injector (startInjector, as `serve` runs it) against a fake API server. */
export async function startHarness(
  fake: FakeApiServer,
  extraArgs: string[] = [],
  context: Partial<Pick<Parameters<typeof startInjector>[1], 'certificateSettings' | 'now' | 'watchLiveness' | 'backoff' | 'namespaceLookupTimeoutMs'>> & { kubeconfig?: string } = {},
): Promise<Harness> {
  const { kubeconfig = fake.writeKubeconfig(), ...injectorContext } = context;
  const certsDir = mkdtempSync(join(tmpdir(), 'ei-cluster-'));
  const settings = parseServeArgs(
    // Classic sidecars unless a test asks otherwise (the fake API server says 1.30); later flags win.
    ['--kubeconfig', kubeconfig, '--namespace', NAMESPACE, '--host', '127.0.0.1', '--port', '0', '--certs-dir', certsDir, '--native-sidecar', 'off', ...extraArgs],
    {},
  );
  assert.ok(settings !== undefined);
  const log = captureLog();
  // A direct namespace read may wait 5 s, not production's 1: the fake API server shares this loaded process.
  const injector = await startInjector(settings, { io: silentIo, env: {}, log: log.logger, backoff: { initialMs: 20, maxMs: 200 }, namespaceLookupTimeoutMs: 5_000, ...injectorContext });
  const url = `https://127.0.0.1:${injector.server.port}`;
  // Dev certificates in files mode; in auto mode the test reads the CA from the webhook configuration.
  const caFile = join(certsDir, 'ca.crt');
  const ca = settings.certificates.mode === 'files' ? readFileSync(caFile, 'utf8') : '';
  return {
    fake,
    injector,
    log,
    url,
    ca,
    review: async (options) => {
      const response = await httpsCall(`${url}/mutate`, { ca, body: JSON.stringify(podReview(options)) });
      assert.equal(response.status, 200, response.body);
      return decodeReview(response.body);
    },
    readiness: async () => {
      const response = await httpsCall(`${url}/readyz`, { ca });
      return { status: response.status, body: JSON.parse(response.body) as Awaited<ReturnType<Harness['readiness']>>['body'] };
    },
  };
}

