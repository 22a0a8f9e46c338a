import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { format, parse as legacyParse } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { FakeApiServer } from './helpers/fake-api-server.js';
import { ROOT } from './helpers/fixtures.js';
import { until } from './helpers/injector-harness.js';
import { ensureLtsNode, LTS_NODE } from './helpers/lts-node.js';

/**
 * The compiled build (`bin/envoy-injector.js`, the bundle the images ship)
 * started on the images' Node.js (test/helpers/lts-node.ts) against an API
 * server: `serve` until its watches are open, `cni-agent` until its first
 * round is done. Neither logs a warning an operator would have to explain
 * away: no `(node:PID) ...Warning` line on stderr, no process warning in
 * the JSON log. Node 24 warns once per process about `url.parse()`
 * (DEP0169) when the call is outside node_modules: node-fetch 2, which
 * client-node's watches use, made it from the bundle (scripts/bundle.ts,
 * scripts/node-fetch-url.cjs).
 */

interface Started {
  readonly lines: string[];
  stop(): Promise<number | null>;
}

function start(node: string, args: readonly string[]): Started {
  const env = { ...process.env };
  delete env['NODE_OPTIONS'];
  const child = spawn(node, ['bin/envoy-injector.js', ...args], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  for (const stream of [child.stdout, child.stderr]) stream.on('data', (chunk: Buffer) => lines.push(...chunk.toString('utf8').split('\n').filter((line) => line !== '')));
  return {
    lines,
    stop: async () => {
      child.kill('SIGTERM');
      return exited;
    },
  };
}

/** Lines that are warnings: Node's own on stderr, or a process warning logged as JSON (the injector's log). */
function warnings(lines: readonly string[]): string[] {
  return lines.filter((line) => /Warning\b|\[DEP\d+\]|"warning":/.test(line));
}

describe(`on the images' Node.js ${LTS_NODE.version}, a start logs no warning`, { timeout: 240_000 }, () => {
  let node = '';
  let fake: FakeApiServer;
  let dir = '';
  before(async () => {
    node = join(await ensureLtsNode(), 'node');
    fake = await FakeApiServer.start();
    dir = await mkdtemp(join(tmpdir(), 'ei-lts-warnings-'));
  });
  after(async () => {
    await fake.close();
    await rm(dir, { recursive: true, force: true });
  });

  it('serve, its watches open against the API server', async () => {
    const watched = fake.requests.filter((request) => request.query['watch'] === 'true').length;
    const serve = start(node, ['serve', '--kubeconfig', fake.writeKubeconfig(dir), '--namespace', 'envoy-injector', '--host', '127.0.0.1', '--port', '0', '--certs-dir', join(dir, 'certs'), '--native-sidecar', 'off']);
    try {
      await until('the injector\'s watches open', () => (fake.requests.filter((request) => request.query['watch'] === 'true' && request.status === 200).length >= watched + 2 ? true : undefined), 60_000);
      await until('the injector serving', () => serve.lines.find((line) => line.includes('envoy-injector serving https')), 30_000);
    } finally {
      assert.equal(await serve.stop(), 0, serve.lines.join('\n'));
    }
    assert.deepEqual(warnings(serve.lines), []);
  });

  it('cni-agent, its first round against the API server', async () => {
    const folder = join(dir, 'agent');
    await mkdir(join(folder, 'bin'), { recursive: true });
    await mkdir(join(folder, 'net.d'), { recursive: true });
    await writeFile(join(folder, 'net.d', '10-ei-node.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: 'ei-node', plugins: [{ type: 'bridge' }] }));
    await writeFile(join(folder, 'plugin'), '#!/bin/sh\n', { mode: 0o755 });
    const ready = join(folder, 'ready');
    const listed = fake.requests.filter((request) => request.path === '/api/v1/pods').length;
    const agent = start(node, ['cni-agent', '--node-name', 'ei-node', '--kubeconfig', fake.writeKubeconfig(folder), '--cni-bin-dir', join(folder, 'bin'), '--cni-conf-dir', join(folder, 'net.d'), '--socket', join(folder, 'cni.sock'), '--plugin', join(folder, 'plugin'), '--rules', join(folder, 'rules.sh'), '--ready-file', ready, '--metrics-port', '0']);
    try {
      await until('the agent ready, the node\'s Pods read', () => (existsSync(ready) && fake.requests.filter((request) => request.path === '/api/v1/pods' && request.status === 200).length > listed ? true : undefined), 60_000);
    } finally {
      // Stopped (0), or ended by the signal when it came before the agent's first round was over (null).
      const code = await agent.stop();
      assert.ok(code === 0 || code === null, `exit ${code}: ${agent.lines.join('\n')}`);
    }
    assert.deepEqual(warnings(agent.lines), []);
  });
});

describe('scripts/node-fetch-url.cjs: node-fetch\'s url.parse from the WHATWG parser', () => {
  const shim = createRequire(import.meta.url)(join(ROOT, 'scripts', 'node-fetch-url.cjs')) as { parse(input: string): Record<string, unknown>; format: unknown };
  it('gives node-fetch the fields the legacy parser gave, for the URLs client-node sends', () => {
    const fields = ['protocol', 'slashes', 'auth', 'host', 'port', 'hostname', 'hash', 'search', 'query', 'pathname', 'path', 'href'];
    for (const input of ['https://127.0.0.1:6443/api/v1/namespaces/x/pods?watch=true&fieldSelector=spec.nodeName%3Dn1', 'https://[fd00::1]:443/version', 'https://user:secret@kube.example/apis?x=1#top', 'http://kube.example/']) {
      // node-fetch hands url.parse an absolute URL as WHATWG's URL writes it (a default port dropped).
      const legacy = legacyParse(new URL(input).toString()) as unknown as Record<string, unknown>;
      assert.deepEqual(Object.fromEntries(fields.map((field) => [field, shim.parse(input)[field]])), Object.fromEntries(fields.map((field) => [field, legacy[field]])), input);
    }
    // Relative: no protocol, which node-fetch refuses ("Only absolute URLs are supported"), as it did.
    assert.equal(shim.parse('/api/v1/pods')['protocol'], null);
    assert.equal(shim.format, format);
  });
});
