import { connect as tlsConnect, type TLSSocket } from 'node:tls';

/** A TLS connection to 127.0.0.1:port trusting only `ca`, resolved once the handshake is done. */
export function openTls(port: number, ca: string): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = tlsConnect({ host: '127.0.0.1', port, ca, servername: 'localhost' }, () => {
      socket.off('error', reject);
      resolve(socket);
    });
    socket.once('error', reject);
  });
}

export interface SocketLife {
  /** ms from `since` to the socket's close. */
  readonly closedAfterMs: Promise<number>;
  /** Everything the server sent, as text. */
  received(): string;
}

/** Watches a socket until it closes, keeping what it receives (errors are part of its life, not failures). */
export function watchSocket(socket: TLSSocket, since = performance.now()): SocketLife {
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  socket.on('error', () => {});
  return {
    closedAfterMs: new Promise((resolve) => socket.once('close', () => resolve(performance.now() - since))),
    received: () => Buffer.concat(chunks).toString('utf8'),
  };
}

/** Writes `text` one byte every `intervalMs` (repeating it forever) until the socket closes. */
export function trickle(socket: TLSSocket, prefix: string, repeat: string, intervalMs: number): void {
  let position = 0;
  const text = (index: number): string | undefined => (index < prefix.length ? prefix[index] : repeat[(index - prefix.length) % repeat.length]);
  const timer = setInterval(() => {
    if (socket.destroyed || !socket.writable) {
      clearInterval(timer);
      return;
    }
    socket.write(text(position++) ?? ' ');
  }, intervalMs);
  socket.once('close', () => clearInterval(timer));
}

export interface RawResponse {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: string;
}

/** Parses an HTTP/1.1 response read whole (the request said `Connection: close`). */
export function parseResponse(text: string): RawResponse {
  const split = text.indexOf('\r\n\r\n');
  const head = split === -1 ? text : text.slice(0, split);
  const [statusLine = '', ...lines] = head.split('\r\n');
  const headers = Object.fromEntries(
    lines.map((line) => {
      const colon = line.indexOf(':');
      return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
    }),
  );
  const status = Number(/^HTTP\/1\.1 (\d{3})/.exec(statusLine)?.[1] ?? 0);
  return { status, headers, body: split === -1 ? '' : text.slice(split + 4) };
}

/** An HTTP/1.1 POST of a JSON body as raw text. */
export function rawPost(path: string, body: string, connection: 'close' | 'keep-alive' = 'close'): string {
  return `POST ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: ${connection}\r\n\r\n${body}`;
}
