/** One-off HTTPS requests that verify the server's certificate against our CA (unlike the load generator). */
import { request } from 'node:https';

export interface HttpsResponse {
  readonly status: number;
  readonly body: Buffer;
}

export function httpsRequest(
  url: string,
  options: { readonly ca: string; readonly method?: string; readonly body?: Buffer; readonly timeoutMs?: number; readonly servername?: string | undefined },
): Promise<HttpsResponse> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      {
        method: options.method ?? 'GET',
        ca: options.ca,
        servername: options.servername,
        agent: false,
        timeout: options.timeoutMs ?? 10_000,
        headers: options.body === undefined ? {} : { 'content-type': 'application/json', 'content-length': options.body.length },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: Buffer.concat(chunks) }));
        res.on('error', reject);
      },
    );
    req.on('timeout', () => req.destroy(new Error(`${url}: no answer in time`)));
    req.on('error', reject);
    req.end(options.body);
  });
}
