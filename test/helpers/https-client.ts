import { request as httpsRequest, type RequestOptions } from 'node:https';
import type { TLSSocket } from 'node:tls';

export interface HttpsResponse {
  readonly status: number;
  readonly headers: Record<string, string | string[] | undefined>;
  readonly body: string;
  /** SHA-256 fingerprint of the certificate the server presented. */
  readonly peerFingerprint: string;
}

/**
 * One HTTPS request on a fresh connection, trusting only `ca` (as the API
 * server trusts only the webhook's caBundle).
 */
export function httpsCall(
  url: string,
  options: { ca: string; method?: string; body?: string | Buffer; headers?: Record<string, string>; extra?: RequestOptions },
): Promise<HttpsResponse> {
  return new Promise((resolve, reject) => {
    const request = httpsRequest(
      url,
      {
        method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
        ca: options.ca,
        agent: false,
        headers: { ...(options.body === undefined ? {} : { 'content-type': 'application/json' }), ...options.headers },
        ...options.extra,
      },
      (response) => {
        const peerFingerprint = (response.socket as TLSSocket).getPeerCertificate().fingerprint256;
        const chunks: Buffer[] = [];
        response.on('data', (chunk: Buffer) => chunks.push(chunk));
        response.on('end', () =>
          resolve({ status: response.statusCode ?? 0, headers: response.headers, body: Buffer.concat(chunks).toString('utf8'), peerFingerprint }),
        );
        response.on('error', reject);
      },
    );
    request.on('error', reject);
    request.end(options.body);
  });
}
