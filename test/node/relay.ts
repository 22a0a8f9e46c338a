import { connect, createServer, type Socket } from 'node:net';

/**
 * A TCP relay: each connection to LISTEN is joined to a new connection to
 * TARGET, bytes passed both ways untouched (TLS included). It does for the
 * node tier what kube-proxy does in a cluster, for the one Service at a time
 * that needs it: there is no kube-proxy here. TARGET is asked per
 * connection; undefined (a Service with no Ready endpoint) refuses it, as
 * kube-proxy's reject rule does.
 */
export interface Relay {
  close(): Promise<void>;
}

type Target = { host: string; port: number } | undefined;

export async function startRelay(listen: { host: string; port: number }, target: () => Target | Promise<Target>): Promise<Relay> {
  const sockets = new Set<Socket>();
  const track = (socket: Socket): void => {
    sockets.add(socket);
    socket.once('close', () => sockets.delete(socket));
  };
  const server = createServer({ pauseOnConnect: true }, (client) => {
    track(client);
    client.once('error', () => undefined);
    void Promise.resolve(target()).catch(() => undefined).then((to) => {
      if (to === undefined || client.destroyed) {
        client.destroy();
        return;
      }
      const upstream = connect(to);
      track(upstream);
      client.pipe(upstream).pipe(client);
      client.once('error', () => upstream.destroy());
      upstream.once('error', () => client.destroy());
      client.resume();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen.port, listen.host, resolve);
  });
  return {
    close: () => new Promise((resolve) => {
      for (const socket of sockets) socket.destroy();
      server.close(() => resolve());
    }),
  };
}
