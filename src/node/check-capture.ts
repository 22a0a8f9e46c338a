import { readFile } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { networkInterfaces } from 'node:os';
import { probeTargets, type ProbeTarget } from './cni/index.js';

// CNI mode's check in the Pod's network namespace (the init container
// envoy-capture-check): which addresses to try, and whether a connection to
// one arrives redirected. `commands/check-capture.ts` parses its arguments.

export interface CheckSettings {
  readonly outboundPort: number;
  readonly excludedCidrs: readonly string[];
  readonly excludedPorts: readonly number[];
  readonly timeoutMs: number;
}

/** The targets a redirected connection could take, from this network namespace's routes and addresses. */
export async function captureTargets(settings: CheckSettings): Promise<ProbeTarget[]> {
  return probeTargets({
    routes: await readFile('/proc/net/route', 'utf8').catch(() => ''),
    ipv6Routes: await readFile('/proc/net/ipv6_route', 'utf8').catch(() => ''),
    ownAddresses: Object.values(networkInterfaces()).flatMap((list) => (list ?? []).map((entry) => entry.address)),
    excludedCidrs: settings.excludedCidrs,
    excludedPorts: settings.excludedPorts,
  });
}

/**
 * Listens on the outbound port and connects to the target: redirected, the
 * connection arrives at the listener from the client's own local port (a
 * real server at the target cannot pass for it). Undefined when it did; else
 * what happened instead. Bounded by the settings' timeout.
 */
export async function redirectProblem(settings: CheckSettings, target: ProbeTarget): Promise<string | undefined> {
  const server = createServer();
  const arrived: number[] = [];
  let onArrival = (): void => {};
  server.on('connection', (socket: Socket) => {
    if (socket.remotePort !== undefined) arrived.push(socket.remotePort);
    socket.destroy();
    onArrival();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    // The family's own socket (IPv6 only on ::), so that a dual-stack Pod's two checks share the port and neither passes for the other.
    server.listen({ port: settings.outboundPort, host: target.family === 6 ? '::' : '0.0.0.0', ipv6Only: target.family === 6 }, () => resolve());
  });
  const client = createConnection({ host: target.address, port: target.port });
  client.on('error', () => {});
  try {
    return await new Promise<string | undefined>((resolve) => {
      const timer = setTimeout(() => resolve(`no connection within ${settings.timeoutMs / 1000} s`), settings.timeoutMs);
      const settle = (problem: string | undefined): void => {
        clearTimeout(timer);
        resolve(problem);
      };
      const judge = (): void => {
        if (client.localPort !== undefined && arrived.includes(client.localPort)) settle(undefined);
      };
      onArrival = judge;
      client.once('connect', judge);
      client.once('error', (error: NodeJS.ErrnoException) => settle(error.code ?? error.message));
      client.once('close', () => setImmediate(() => settle('the connection closed elsewhere')));
    });
  } finally {
    client.destroy();
    await closeServer(server);
  }
}

function closeServer(server: Server): Promise<void> {
  return new Promise((resolve) => server.close(() => resolve()));
}
