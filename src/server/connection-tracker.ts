import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Server, Socket } from 'node:net';

/**
 * The open connections of a server and the requests in flight on each, so
 * that shutdown can close every connection that has nothing in flight.
 *
 * Node's `server.close()` closes only connections that have finished a
 * request: one that completed the TLS handshake and never sent a byte (the
 * API server's Go client dials such spare connections) counts as active, and
 * `close()` also stops the check that would enforce `headersTimeout` on it,
 * so it stays open until the shutdown timeout cuts it (issue 10).
 */
export class ConnectionTracker {
  readonly #inFlight = new Map<Socket, number>();
  #closing = false;

  /** `connectionEvent`: `secureConnection` for a TLS server (its sockets carry the requests), else `connection`. */
  constructor(server: Server, connectionEvent: 'connection' | 'secureConnection') {
    // Before Node's own listener, which may emit a request already waiting on the socket.
    server.prependListener(connectionEvent, (socket: Socket) => {
      this.#inFlight.set(socket, 0);
      socket.once('close', () => this.#inFlight.delete(socket));
      // A handshake completed after closing began: kept only if a request was already waiting on it.
      if (this.#closing) setImmediate(() => this.#destroyIfIdle(socket));
    });
    server.on('request', (request: IncomingMessage, response: ServerResponse) => {
      const { socket } = request;
      const count = this.#inFlight.get(socket);
      if (count === undefined) return;
      this.#inFlight.set(socket, count + 1);
      response.once('close', () => this.#finished(socket));
    });
  }

  /**
   * Destroys every connection with no request in flight; the others close
   * once their last request is answered, and so do connections that complete
   * their handshake from now on with no request.
   */
  closeIdle(): { closed: number; finishing: number } {
    this.#closing = true;
    let closed = 0;
    let finishing = 0;
    for (const socket of this.#inFlight.keys()) {
      if (this.#destroyIfIdle(socket)) closed += 1;
      else finishing += 1;
    }
    return { closed, finishing };
  }

  #destroyIfIdle(socket: Socket): boolean {
    if (this.#inFlight.get(socket) !== 0) return false;
    socket.destroy();
    return true;
  }

  #finished(socket: Socket): void {
    const count = this.#inFlight.get(socket);
    if (count === undefined) return;
    this.#inFlight.set(socket, count - 1);
    // The answer is written by now ('close' follows 'finish'). Node already ends a connection answered
    // `Connection: close`; one answered keep-alive before draining began is idle now.
    if (this.#closing && !socket.writableEnded) this.#destroyIfIdle(socket);
  }
}
