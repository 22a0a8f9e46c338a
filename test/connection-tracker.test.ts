import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { describe, it } from 'node:test';
import { ConnectionTracker } from '../src/server/connection-tracker.js';
import { until } from './helpers/injector-harness.js';

/** A connected plain TCP socket, what it received, and when the server closed it. */
async function openClient(port: number): Promise<{ socket: Socket; received: () => string }> {
  const socket = await new Promise<Socket>((resolve, reject) => {
    const opened = connect({ host: '127.0.0.1', port }, () => resolve(opened));
    opened.once('error', reject);
  });
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => {});
  return { socket, received: () => Buffer.concat(chunks).toString('utf8') };
}

describe('ConnectionTracker', () => {
  it('closeIdle destroys never-requested and idle connections; one answering keep-alive is closed once its answer is written', async () => {
    let release: () => void = () => {};
    const released = new Promise<void>((resolve) => (release = resolve));
    const server = createServer((request, response) => {
      if (request.url === '/slow') {
        // Headers out before closing began: they say keep-alive.
        response.writeHead(200, { 'content-length': '2' });
        response.write('o');
        void released.then(() => response.end('k'));
      } else response.end('fast');
    });
    // Only the tracker may close an idle connection here.
    server.keepAliveTimeout = 0;
    const tracker = new ConnectionTracker(server, 'connection');
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    try {
      const silent = await openClient(port);
      const idle = await openClient(port);
      idle.socket.write('GET /fast HTTP/1.1\r\nHost: x\r\n\r\n');
      await until('the idle connection answered', () => idle.received().endsWith('fast') || undefined);
      const slow = await openClient(port);
      slow.socket.write('GET /slow HTTP/1.1\r\nHost: x\r\n\r\n');
      await until('the slow answer started', () => slow.received().endsWith('o') || undefined);

      assert.deepEqual(tracker.closeIdle(), { closed: 2, finishing: 1 });
      await until('the never-requested and the idle connection closed by the server', () => (silent.socket.destroyed && idle.socket.destroyed) || undefined);
      assert.equal(slow.socket.destroyed, false);
      release();
      await until('the slow connection closed by the server after its answer', () => slow.socket.destroyed || undefined);
      assert.match(slow.received(), /^HTTP\/1\.1 200 OK\r\n/);
      assert.match(slow.received(), /\r\nConnection: keep-alive\r\n/);
      assert.ok(slow.received().endsWith('\r\n\r\nok'), 'the whole answer arrived before the close');
    } finally {
      release();
      server.closeAllConnections();
      server.close();
    }
  });
});
