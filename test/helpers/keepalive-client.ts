import { Agent, request as httpsRequest } from 'node:https';

/** An HTTPS agent that reuses connections, as the API server does, trusting only `ca`. */
export function keepAliveAgent(ca: string, maxSockets: number): Agent {
  return new Agent({ keepAlive: true, maxSockets, maxFreeSockets: maxSockets, ca });
}

export interface PostAnswer {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** The request went out on a connection that had already carried one. */
  readonly reusedSocket: boolean;
  readonly ms: number;
}

/** A failed call, with what is needed to tell a refused connect from a reset keep-alive connection. */
export class CallError extends Error {
  constructor(
    message: string,
    readonly code: string | undefined,
    readonly reusedSocket: boolean,
    /** Some response bytes had arrived before the failure. */
    readonly responseStarted: boolean,
  ) {
    super(message);
  }
}

/** POSTs `body` over `agent`; rejects with a CallError on any socket failure. */
export function postBody(
  url: string,
  body: string | Buffer,
  options: { agent: Agent | false; ca?: string; contentType?: string; headers?: Record<string, string>; timeoutMs?: number },
): Promise<PostAnswer> {
  const started = performance.now();
  return new Promise((resolve, reject) => {
    let responseStarted = false;
    const request = httpsRequest(
      url,
      {
        method: 'POST',
        agent: options.agent,
        ...(options.ca === undefined ? {} : { ca: options.ca }),
        headers: { 'content-type': options.contentType ?? 'application/json', ...options.headers },
      },
      (response) => {
        responseStarted = true;
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({
            status: response.statusCode ?? 0,
            headers: response.headers,
            body: Buffer.concat(chunks).toString('utf8'),
            reusedSocket: request.reusedSocket,
            ms: performance.now() - started,
          }),
        );
        response.on('error', (error: NodeJS.ErrnoException) => reject(new CallError(error.message, error.code, request.reusedSocket, true)));
      },
    );
    if (options.timeoutMs !== undefined) {
      request.setTimeout(options.timeoutMs, () => request.destroy(Object.assign(new Error(`no answer within ${options.timeoutMs} ms`), { code: 'ETIMEDOUT' })));
    }
    request.on('error', (error: NodeJS.ErrnoException) => reject(new CallError(error.message, error.code, request.reusedSocket, responseStarted)));
    request.end(body);
  });
}

/** Runs `work` over `items` with at most `concurrency` at a time, in order of items. */
export async function runPool<T, R>(items: readonly T[], concurrency: number, work: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  const worker = async (): Promise<void> => {
    while (next < items.length) {
      const index = next++;
      results[index] = await work(items[index] as T, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, items.length) }, worker));
  return results;
}
