import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { InjectorMetrics } from './metrics.js';

export interface HealthServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Policy mode's only endpoints, over plain HTTP (it serves no admission
 * requests, so it has no certificate): GET /healthz, GET /readyz (200 when
 * `ready()` says so, else 503 with the reason), GET /metrics.
 */
export async function startHealthServer(options: {
  host: string;
  port: number;
  metrics: InjectorMetrics;
  ready: () => { ready: boolean; reason: string };
}): Promise<HealthServer> {
  const server: Server = createServer((request, response) => {
    const path = (request.url ?? '').split('?')[0];
    if (request.method !== 'GET') {
      response.writeHead(405, { 'content-type': 'text/plain' }).end('GET only\n');
    } else if (path === '/healthz') {
      response.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
    } else if (path === '/readyz') {
      const { ready, reason } = options.ready();
      response.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' }).end(`${reason}\n`);
    } else if (path === '/metrics') {
      options.metrics.render().then(
        ({ contentType, body }) => response.writeHead(200, { 'content-type': contentType }).end(body),
        () => response.writeHead(500, { 'content-type': 'text/plain' }).end('metrics unavailable\n'),
      );
    } else {
      response.writeHead(404, { 'content-type': 'text/plain' }).end('not found: /healthz, /readyz, /metrics\n');
    }
  });
  server.requestTimeout = 10_000;
  server.headersTimeout = 5_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port, options.host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
