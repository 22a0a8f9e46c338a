import { connect, createServer, type Server, type Socket } from 'node:net';

/**
 * A round-robin TCP balancer on loopback, like a Service's ClusterIP: each
 * new client connection is joined to one backend for its whole life (TLS
 * passes through untouched), so keep-alive connections stay on the replica
 * they were opened to. A backend that refuses the connect is skipped and the
 * next one tried (nothing was sent yet, so that is always safe).
 */
export interface TcpBalancer {
  readonly port: number;
  /** Client connections joined to a backend, per backend port. */
  readonly joined: Map<number, number>;
  /** Connects refused by a backend and retried on the next one. */
  refusedRetries: number;
  /** Client connections closed because no backend would take them. */
  unserved: number;
  /**
   * On: every connection, open or new, stays open but nothing more is
   * forwarded either way (a proxy or load balancer whose backend is gone
   * while it keeps its clients' connections; the clients' TCP keepalive
   * probes are still answered, by this machine). Off again: those connections
   * are cut, as such a proxy eventually does; new ones are forwarded.
   */
  blackhole(on: boolean): void;
  close(): Promise<void>;
}

/** LISTEN: where clients connect (default 127.0.0.1 on a free port), e.g. a Service's ClusterIP and port. */
export async function startTcpBalancer(backends: () => readonly number[], listen: { host: string; port: number } = { host: '127.0.0.1', port: 0 }): Promise<TcpBalancer> {
  const sockets = new Set<Socket>();
  /** Each joined pair, to unjoin when the balancer goes dark. */
  const pairs = new Set<[Socket, Socket]>();
  /** Connections held while dark, cut when it lights again. */
  const dark = new Set<Socket>();
  let darkened = false;
  let next = 0;
  const balancer: TcpBalancer = {
    port: 0,
    joined: new Map(),
    refusedRetries: 0,
    unserved: 0,
    blackhole: (on) => {
      darkened = on;
      if (on) {
        for (const [client, upstream] of pairs) {
          client.unpipe(upstream);
          upstream.unpipe(client);
          client.pause();
          upstream.pause();
          dark.add(client).add(upstream);
        }
        pairs.clear();
        return;
      }
      for (const socket of dark) socket.destroy();
      dark.clear();
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
  };

  const server: Server = createServer({ pauseOnConnect: true }, (client) => {
    track(client);
    client.once('error', () => client.destroy());
    if (darkened) {
      dark.add(client); // accepted, never answered
      return;
    }
    // Round robin: each connection starts at the next backend and tries each one at most once.
    const all = backends();
    const start = next++;
    const ports = all.map((_, index) => all[(start + index) % all.length] as number);
    const tryBackend = (attempt: number): void => {
      if (client.destroyed) return;
      const port = ports[attempt];
      if (port === undefined) {
        balancer.unserved += 1;
        client.destroy();
        return;
      }
      const upstream = connect({ host: '127.0.0.1', port });
      track(upstream);
      upstream.once('error', (error: NodeJS.ErrnoException) => {
        if (error.code === 'ECONNREFUSED') {
          balancer.refusedRetries += 1;
          tryBackend(attempt + 1);
        } else client.destroy();
      });
      upstream.once('connect', () => {
        balancer.joined.set(port, (balancer.joined.get(port) ?? 0) + 1);
        upstream.removeAllListeners('error');
        // A reset on either side resets the other; a clean close ends it (pipe ends it after the last bytes).
        upstream.on('error', () => client.destroy());
        client.on('error', () => upstream.destroy());
        upstream.on('close', (hadError) => (hadError ? client.destroy() : client.end()));
        client.on('close', (hadError) => (hadError ? upstream.destroy() : upstream.end()));
        if (darkened) {
          dark.add(client).add(upstream);
          return;
        }
        const pair: [Socket, Socket] = [client, upstream];
        pairs.add(pair);
        client.once('close', () => pairs.delete(pair));
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
      });
    };
    tryBackend(0);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  return Object.assign(balancer, { port: typeof address === 'object' && address !== null ? address.port : 0 });
}
