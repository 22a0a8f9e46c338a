import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { mkdirSync, mkdtempSync, readFileSync, renameSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { request as httpRequest } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { connect, createServer as createTlsServer, type SecureVersion } from 'node:tls';
import { after, before, describe, it } from 'node:test';
import { generate } from 'selfsigned';
import { runCli } from '../src/cli.js';
import { parseServeArgs, startInjector } from '../src/commands/serve.js';
import { makeCa, makeCertificates, makeServingCertificate } from '../src/tls/certificates.js';
import { httpsCall } from './helpers/https-client.js';
import { captureLog, makeTestCertificates, startTestServer, type TestServer } from './helpers/server.js';

/** Resolves with the negotiated protocol, or rejects with the handshake error. */
function handshake(port: number, ca: string, version: SecureVersion): Promise<string> {
  return new Promise((resolve, reject) => {
    // SECLEVEL=0 lets this client offer TLS 1.0/1.1 at all, so a refusal can only come from the server.
    const socket = connect({ host: '127.0.0.1', port, ca, servername: 'localhost', minVersion: version, maxVersion: version, ciphers: 'DEFAULT:@SECLEVEL=0' });
    socket.once('secureConnect', () => {
      resolve(socket.getProtocol() ?? '');
      socket.end();
    });
    socket.once('error', reject);
  });
}

describe('TLS', () => {
  let server: TestServer;
  before(async () => {
    server = await startTestServer();
  });
  after(async () => {
    await server.shutdown();
  });

  it('speaks TLS 1.2 and 1.3', async () => {
    assert.equal(await handshake(server.port, server.ca, 'TLSv1.2'), 'TLSv1.2');
    assert.equal(await handshake(server.port, server.ca, 'TLSv1.3'), 'TLSv1.3');
  });

  it('refuses a TLS 1.1-only client (which a TLS 1.1 server would accept)', async () => {
    const legacy = createTlsServer({ cert: readFileSync(server.certs.certFile), key: readFileSync(server.certs.keyFile), minVersion: 'TLSv1', ciphers: 'DEFAULT:@SECLEVEL=0' }, (socket) => socket.end());
    await new Promise<void>((resolve) => legacy.listen(0, '127.0.0.1', resolve));
    try {
      const legacyPort = (legacy.address() as { port: number }).port;
      assert.equal(await handshake(legacyPort, server.ca, 'TLSv1.1'), 'TLSv1.1', 'control: this client can speak TLS 1.1');
    } finally {
      legacy.close();
    }
    await assert.rejects(handshake(server.port, server.ca, 'TLSv1.1'), /version|protocol/i);
  });

  it('refuses plain HTTP on the port', async () => {
    const outcome = await new Promise<string>((resolve) => {
      const request = httpRequest({ host: '127.0.0.1', port: server.port, path: '/healthz', agent: false }, (response) => resolve(`HTTP ${response.statusCode}`));
      request.on('error', (error) => resolve(`error: ${error.message}`));
      request.end();
    });
    assert.match(outcome, /^error: /);
  });

  it('a client that does not trust our CA cannot connect', async () => {
    const other = await makeCa({ commonName: 'some other CA', validDays: 1 });
    await assert.rejects(httpsCall(`${server.url}/healthz`, { ca: other.cert }), /self-signed|unable to verify|certificate/i);
  });
});

describe('client certificates (--client-ca)', () => {
  it('refuses a client without a certificate and accepts one signed by the client CA', async () => {
    const clientCa = await makeCa({ commonName: 'apiserver client CA', validDays: 1 });
    const client = await generate([{ name: 'commonName', value: 'kube-apiserver' }], {
      keyType: 'ec',
      algorithm: 'sha256',
      ca: clientCa,
      extensions: [{ name: 'extKeyUsage', clientAuth: true }],
    });
    const certs = await makeTestCertificates();
    const clientCaFile = join(certs.dir, 'client-ca.crt');
    writeFileSync(clientCaFile, clientCa.cert);
    const server = await startTestServer({ certs, tls: { files: { certFile: certs.certFile, keyFile: certs.keyFile, clientCaFile } } });
    try {
      await assert.rejects(httpsCall(`${server.url}/healthz`, { ca: server.ca }), /certificate|socket hang up|ECONNRESET/i);
      const ok = await httpsCall(`${server.url}/healthz`, { ca: server.ca, extra: { cert: client.cert, key: client.private } });
      assert.equal(ok.status, 200);
    } finally {
      await server.shutdown();
    }
  });
});

describe('--client-ca that cannot be a CA is an error at start', () => {
  for (const { name, content, problem } of [
    { name: 'a missing file', content: undefined, problem: /cannot read .*client-ca\.crt: ENOENT/ },
    { name: 'an empty file', content: '', problem: /client-ca\.crt: no PEM certificate in it/ },
    { name: 'a file that is no certificate', content: 'not a certificate\n', problem: /client-ca\.crt: no PEM certificate in it/ },
    { name: 'a broken certificate', content: '-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n', problem: /client-ca\.crt: certificate 1 is unreadable/ },
  ]) {
    it(`${name}: startup fails naming the file, nothing is served`, async () => {
      const certs = await makeTestCertificates();
      const clientCaFile = join(certs.dir, 'client-ca.crt');
      if (content !== undefined) writeFileSync(clientCaFile, content);
      const settings = parseServeArgs(['--tls-cert', certs.certFile, '--tls-key', certs.keyFile, '--client-ca', clientCaFile, '--port', '0', '--host', '127.0.0.1'], {});
      assert.ok(settings !== undefined);
      const io = { stdin: process.stdin, stdout: { write: () => true }, stderr: { write: () => true } };
      const started = startInjector(settings, { io, env: {}, log: captureLog().logger });
      // Stopped should it start after all, so a failing run cannot hang the suite.
      void started.then((injector) => injector.stop(), () => undefined);
      await assert.rejects(started, (error: Error & { code?: string }) => {
        assert.equal(error.code, 'EI_CERTIFICATE_INVALID');
        assert.match(error.message, problem);
        return true;
      });
    });
  }

  it('a client CA file emptied later is rejected on reload: the previous one stays', async () => {
    const clientCa = await makeCa({ commonName: 'apiserver client CA', validDays: 1 });
    const certs = await makeTestCertificates();
    const clientCaFile = join(certs.dir, 'client-ca.crt');
    writeFileSync(clientCaFile, clientCa.cert);
    const server = await startTestServer({ certs, tlsReloadIntervalMs: 25, tls: { files: { certFile: certs.certFile, keyFile: certs.keyFile, clientCaFile } } });
    try {
      writeFileSync(clientCaFile, '');
      const deadline = Date.now() + 5_000;
      while (!server.log.lines.some((line) => line['level'] === 50) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      const error = server.log.lines.find((line) => line['level'] === 50);
      assert.match(String(error?.['msg']), /new certificate files rejected, still serving the previous certificate: .*client-ca\.crt: no PEM certificate in it/);
    } finally {
      await server.shutdown();
    }
  });
});

describe('certificate reload', () => {
  /** The layout of a Kubernetes Secret volume: files are symlinks into `..data`, itself a symlink swapped atomically. */
  function secretVolume(initial: { cert: string; key: string }): { dir: string; swap: (pair: { cert: string; key: string }) => void } {
    const dir = mkdtempSync(join(tmpdir(), 'ei-secret-'));
    let version = 0;
    const writeVersion = (pair: { cert: string; key: string }): string => {
      const name = `..2026_11_29_${version++}`;
      mkdirSync(join(dir, name));
      writeFileSync(join(dir, name, 'tls.crt'), pair.cert);
      writeFileSync(join(dir, name, 'tls.key'), pair.key);
      return name;
    };
    symlinkSync(writeVersion(initial), join(dir, '..data'));
    symlinkSync('..data/tls.crt', join(dir, 'tls.crt'));
    symlinkSync('..data/tls.key', join(dir, 'tls.key'));
    return {
      dir,
      swap: (pair) => {
        const name = writeVersion(pair);
        symlinkSync(name, join(dir, '..data_tmp'));
        renameSync(join(dir, '..data_tmp'), join(dir, '..data'));
      },
    };
  }

  it('serves the new certificate after a Secret-style swap, with no failed request meanwhile', async () => {
    const first = await makeCertificates({ hosts: [] });
    // The renewed serving certificate comes from the same CA, as in a rotation.
    const renewed = { serving: await makeServingCertificate({ ca: first.ca, hosts: [], validDays: 30 }) };
    const volume = secretVolume(first.serving);
    const certs = { dir: volume.dir, certFile: join(volume.dir, 'tls.crt'), keyFile: join(volume.dir, 'tls.key'), ca: first.ca.cert };
    const server = await startTestServer({ certs, tlsReloadIntervalMs: 25 });
    const oldFingerprint = new X509Certificate(first.serving.cert).fingerprint256;
    const newFingerprint = new X509Certificate(renewed.serving.cert).fingerprint256;
    try {
      const seen = new Set<string>();
      let failures = 0;
      let requests = 0;
      let swapped = false;
      const deadline = Date.now() + 30_000;
      while (Date.now() < deadline) {
        const batch = await Promise.allSettled(Array.from({ length: 5 }, () => httpsCall(`${server.url}/healthz`, { ca: certs.ca })));
        for (const result of batch) {
          requests += 1;
          if (result.status === 'fulfilled' && result.value.status === 200) seen.add(result.value.peerFingerprint);
          else failures += 1;
        }
        if (!swapped && requests >= 20) {
          volume.swap(renewed.serving);
          swapped = true;
        }
        if (seen.has(newFingerprint) && requests >= 60) break;
      }
      assert.equal(failures, 0, `${failures} of ${requests} requests failed`);
      assert.ok(seen.has(oldFingerprint), 'served the first certificate');
      assert.ok(seen.has(newFingerprint), 'served the renewed certificate');
      assert.ok(server.log.lines.some((line) => line['msg'] === 'serving certificate loaded' && line['fingerprint256'] === newFingerprint));
    } finally {
      await server.shutdown();
    }
  });

  it('keeps the old pair when the new files do not belong together, and says so', async () => {
    const first = await makeCertificates({ hosts: [] });
    const other = await makeCertificates({ hosts: [] });
    const volume = secretVolume(first.serving);
    const certs = { dir: volume.dir, certFile: join(volume.dir, 'tls.crt'), keyFile: join(volume.dir, 'tls.key'), ca: first.ca.cert };
    const server = await startTestServer({ certs, tlsReloadIntervalMs: 25 });
    try {
      volume.swap({ cert: other.serving.cert, key: first.serving.key });
      const deadline = Date.now() + 30_000;
      while (!server.log.lines.some((line) => line['level'] === 50) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 25));
      const error = server.log.lines.find((line) => line['level'] === 50);
      assert.match(String(error?.['msg']), /new certificate files rejected, still serving the previous certificate: .*the private key does not belong to the certificate/);
      const response = await httpsCall(`${server.url}/healthz`, { ca: certs.ca });
      assert.equal(response.peerFingerprint, new X509Certificate(first.serving.cert).fingerprint256);
    } finally {
      await server.shutdown();
    }
  });
});

describe('envoy-injector certs', () => {
  it('makes a CA and a serving certificate with every --host, localhost and 127.0.0.1, verifying against the CA', async () => {
    const out = mkdtempSync(join(tmpdir(), 'ei-certs-cmd-'));
    let stdout = '';
    const code = await runCli(['certs', '--out', out, '--host', 'webhook.injector.svc', '--host', '10.0.0.7'], {
      stdin: process.stdin,
      stdout: { write: (chunk: string) => (stdout += chunk) },
      stderr: { write: () => true },
    });
    assert.equal(code, 0);
    const ca = new X509Certificate(readFileSync(join(out, 'ca.crt')));
    const leaf = new X509Certificate(readFileSync(join(out, 'tls.crt')));
    assert.ok(ca.ca, 'ca.crt is a CA');
    assert.ok(!leaf.ca, 'tls.crt is not a CA');
    assert.ok(leaf.checkIssued(ca) && leaf.verify(ca.publicKey), 'tls.crt is signed by ca.crt');
    for (const san of ['DNS:webhook.injector.svc', 'IP Address:10.0.0.7', 'DNS:localhost', 'IP Address:127.0.0.1']) {
      assert.ok(leaf.subjectAltName?.split(', ').includes(san), `${san} in ${leaf.subjectAltName}`);
    }
    assert.match(stdout, /serving certificate for DNS:webhook\.injector\.svc/);
    assert.equal(statSync(join(out, 'tls.key')).mode & 0o777, 0o600);
    assert.equal(statSync(join(out, 'ca.key')).mode & 0o777, 0o600);
  });
});
