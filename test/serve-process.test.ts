import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import type { JsonObject } from '../src/injection/index.js';
import { repoFile, ROOT } from './helpers/fixtures.js';
import { httpsCall } from './helpers/https-client.js';
import { until } from './helpers/injector-harness.js';
import { largePod } from './helpers/large-pod.js';
import { applyIndependently } from './helpers/patch.js';
import { spawnServer } from './helpers/process.js';

function patchOf(body: string): unknown[] {
  const review = JSON.parse(body) as { response: { patch: string } };
  return JSON.parse(Buffer.from(review.response.patch, 'base64').toString('utf8')) as unknown[];
}

describe('envoy-injector serve, as a process', () => {
  it('on a fresh start makes dev certificates and the printed curl line injects the sidecar', async () => {
    const certsDir = mkdtempSync(join(tmpdir(), 'ei-start-'));
    const server = await spawnServer(['--certs-dir', certsDir]);
    try {
      // stderr is its own pipe: the line may arrive after stdout's "listening" on a loaded machine.
      const hint = await until('the "try it: curl" line on stderr', () => server.stderr.find((line) => line.startsWith('try it: curl ')), 20_000);
      const [, caFile, url] = /--cacert (\S+) .* (https:\/\/\S+)$/.exec(hint) ?? [];
      assert.equal(caFile, join(certsDir, 'ca.crt'));
      assert.equal(url, `https://localhost:${server.port}/mutate`);
      assert.ok(hint.includes('--data-binary @examples/admission-review.json'));

      const review = JSON.parse(repoFile('examples/admission-review.json')) as { request: { object: JsonObject } };
      const response = await httpsCall(url.replace('localhost', '127.0.0.1'), { ca: readFileSync(caFile, 'utf8'), body: repoFile('examples/admission-review.json') });
      assert.equal(response.status, 200);
      const patched = applyIndependently(review.request.object, patchOf(response.body));
      assert.ok(((patched['spec'] as JsonObject)['containers'] as JsonObject[]).some((c) => c['name'] === 'envoy'));

      // The line itself, where curl exists (it talks to localhost, as printed).
      let curlOutput: string | undefined;
      try {
        curlOutput = execFileSync('curl', ['-sS', ...hint.slice('try it: curl '.length).split(' ')], { cwd: ROOT, encoding: 'utf8' });
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
      }
      if (curlOutput !== undefined) assert.ok(patchOf(curlOutput).length > 0);
    } finally {
      server.child.kill('SIGTERM');
      assert.equal(await server.exited, 0);
    }
  });

  it('--help lists the flags and their environment variables', () => {
    const help = execFileSync(process.execPath, ['bin/envoy-injector.js', 'serve', '--help'], { cwd: ROOT, encoding: 'utf8' });
    for (const expected of ['--port', 'PORT', '--host', 'HOST', '--template-file', 'TEMPLATE_FILE', '--log-level', 'LOG_LEVEL', '--tls-cert', 'TLS_CERT_FILE', '--client-ca']) {
      assert.ok(help.includes(expected), expected);
    }
  });

  it('refuses a bad flag value with exit 2 and a bad template file with exit 1', () => {
    const run = (args: string[]) => {
      try {
        execFileSync(process.execPath, ['bin/envoy-injector.js', 'serve', ...args], { cwd: ROOT, encoding: 'utf8', stdio: 'pipe' });
        return { status: 0, stderr: '' };
      } catch (error) {
        const failure = error as { status: number; stderr: string };
        return { status: failure.status, stderr: failure.stderr };
      }
    };
    assert.deepEqual(run(['--port', 'eighty']), { status: 2, stderr: 'envoy-injector: --port: must be an integer from 0 to 65535\n' });
    const bad = run(['--template-file', 'test/golden/deployment.yaml']);
    assert.equal(bad.status, 1);
    assert.match(bad.stderr, /^envoy-injector: test\/golden\/deployment.yaml: config: /);
  });

  it('a process warning (a dependency\'s deprecation) is a JSON log line, not plain text on stderr', async () => {
    // The warning is emitted on SIGUSR2, so after serve has started: as client-node's are, at its first request.
    const emitOnSignal = 'process.on("SIGUSR2", () => process.emitWarning("a dependency\'s API is going away", "DeprecationWarning", "DEP0999"));';
    const server = await spawnServer(['--certs-dir', mkdtempSync(join(tmpdir(), 'ei-warn-'))], { NODE_OPTIONS: `--import=data:text/javascript,${encodeURIComponent(emitOnSignal)}` });
    try {
      server.child.kill('SIGUSR2');
      const line = await until('the warning in the JSON log', () => server.logs.find((entry) => entry['msg'] === "a dependency's API is going away"), 20_000);
      assert.equal(line['level'], 40, 'logged at warn');
      assert.deepEqual(line['warning'], { name: 'DeprecationWarning', code: 'DEP0999' });
      assert.deepEqual(server.stderr.filter((text) => text.includes('DEP0999') || text.includes('--trace-deprecation')), []);
    } finally {
      server.child.kill('SIGTERM');
      await server.exited;
    }
  });

  it('SIGTERM during a burst: readiness turns 503, every accepted request completes, exit 0', async () => {
    const certsDir = mkdtempSync(join(tmpdir(), 'ei-term-'));
    // The readiness call below must land within the delay: 5 s leaves room for a slow, busy machine.
    // At debug the server logs the uid of every review it decided: which requests it accepted.
    const server = await spawnServer(['--certs-dir', certsDir, '--shutdown-delay', '5s', '--log-level', 'debug']);
    const ca = readFileSync(join(certsDir, 'ca.crt'), 'utf8');
    const base = `https://127.0.0.1:${server.port}`;
    const object = { ...largePod({ targetBytes: 256 * 1024 }), metadata: { generateName: 'big-', annotations: { 'envoy-injector.io/inject': 'true' } } };
    const bodyFor = (uid: string): string =>
      JSON.stringify({
        apiVersion: 'admission.k8s.io/v1',
        kind: 'AdmissionReview',
        request: { uid, kind: { group: '', version: 'v1', kind: 'Pod' }, resource: { group: '', version: 'v1', resource: 'pods' }, namespace: 'load', operation: 'CREATE', object },
      });
    // 60 requests, each on its own connection, all written before the signal.
    const written: Promise<void>[] = [];
    const answers = Array.from({ length: 60 }, (_, index) => {
      const uid = `burst-${index}`;
      return new Promise<{ uid: string; status?: number; error?: string; responded: boolean }>((resolve) => {
        let responded = false;
        const request = httpsRequest(`${base}/mutate`, { method: 'POST', ca, agent: false, headers: { 'content-type': 'application/json' } }, (response) => {
          responded = true;
          response.resume();
          response.on('end', () => resolve({ uid, status: response.statusCode ?? 0, responded }));
        });
        request.on('error', (error: NodeJS.ErrnoException) => resolve({ uid, error: error.code ?? error.message, responded }));
        written.push(new Promise((done) => request.on('finish', done)));
        request.end(bodyFor(uid));
      });
    });
    await Promise.all(written);
    server.child.kill('SIGTERM');
    const readiness = await httpsCall(`${base}/readyz`, { ca });
    assert.equal(readiness.status, 503, 'unready while draining');
    assert.equal((JSON.parse(readiness.body) as { checks: { draining: boolean } }).checks.draining, true);
    const outcomes = await Promise.all(answers);
    assert.equal(await server.exited, 0);
    assert.ok(server.logs.some((line) => line['msg'] === 'shut down'));

    const decided = new Set(server.logs.map((line) => line['uid']).filter((uid) => typeof uid === 'string'));
    // Every request the server accepted was answered 200.
    assert.deepEqual(outcomes.filter((o) => decided.has(o.uid) && o.status !== 200).map((o) => `${o.uid}: ${o.status ?? o.error}`), []);
    // The rest can only be HTTP/1.1's close race (docs/operations.md, Shutdown): reset before any response, never seen.
    assert.deepEqual(outcomes.filter((o) => !decided.has(o.uid) && !(o.error === 'ECONNRESET' && !o.responded)).map((o) => `${o.uid}: ${o.status ?? o.error}`), []);
    assert.ok(decided.size > 0, 'the server answered none of the burst');
    await assert.rejects(httpsCall(`${base}/healthz`, { ca }), /ECONNREFUSED/, 'nothing listens after exit');
  });
});
