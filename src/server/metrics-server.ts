import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ConnectionTracker } from './connection-tracker.js';

/**
 * `/metrics` over plain HTTP on a port of its own, for scrapers that do not
 * speak TLS. It serves nothing else, so it exposes nothing the HTTPS port
 * does not.
 */
export async function startMetricsServer(
  metrics: { render(): Promise<{ contentType: string; body: string }> },
  host: string,
  port: number,
): Promise<{ port: number; close(): Promise<void>; closeAllConnections(): void }> {
  const server: Server = createServer((request, response) => {
    if (request.method !== 'GET' || (request.url ?? '').split('?')[0] !== '/metrics') {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: this port serves GET /metrics only\n');
      return;
    }
    metrics.render().then(
      ({ contentType, body }) => response.writeHead(200, { 'content-type': contentType }).end(body),
      () => response.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable\n'),
    );
  });
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  const connections = new ConnectionTracker(server, 'connection');
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      connections.closeIdle();
      return new Promise((resolve) => server.close(() => resolve()));
    },
    closeAllConnections: () => server.closeAllConnections(),
  };
}
