/**
 * What the capture scenarios ask the apps and read from the stand-in's
 * records (capture.test.ts, capture-cni.test.ts).
 */
import { request } from 'node:http';
import { eventually } from '../e2e/cluster.js';
import type { Recorder } from './recorder.js';

/** GET http://HOST:8080/call?target=TARGET from the test: the app at HOST calls TARGET and answers with the reply's first line. */
export function askToCall(host: string, target: string): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const call = request({ host, port: 8080, path: `/call?target=${target}`, timeout: 10_000 }, (response) => {
      let body = '';
      response.setEncoding('utf8').on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body: body.trim() }));
    });
    call.once('timeout', () => call.destroy(new Error(`GET ${host}:8080/call?target=${target}: no answer in 10 s`)));
    call.once('error', reject);
    call.end();
  });
}

export const relayed = (recorder: Recorder, pod: string, listener: string, original: readonly [string, number]): number =>
  recorder.of(pod, 'stand-in', 'relayed').filter((record) => record['listener'] === listener && JSON.stringify(record['original']) === JSON.stringify(original)).length;

/** Waits until POD's stand-in has relayed more than AT_LEAST connections of LISTENER to ORIGINAL (records arrive a moment after the fact). */
export const waitRelayed = (recorder: Recorder, pod: string, listener: string, original: readonly [string, number], atLeast = 1): Promise<true> =>
  eventually(`Pod ${pod}'s stand-in relaying a connection on its ${listener} listener to ${original.join(':')}`, async () =>
    relayed(recorder, pod, listener, original) >= atLeast ? true : undefined, 15_000);
