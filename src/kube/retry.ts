import type { Logger } from 'pino';
import { describeKubeError, kubeErrorForLog } from './kube-errors.js';
import { backoffDelayMs, type Backoff } from './backoff.js';

/** Runs `task` until it succeeds, waiting a capped, jittered, growing delay between attempts. */
export async function retryUntilDone<T>(what: string, task: () => Promise<T>, backoff: Backoff, log: Logger): Promise<T> {
  for (let failures = 0; ; failures++) {
    try {
      return await task();
    } catch (error) {
      const delayMs = backoffDelayMs(backoff, failures);
      const reason = describeKubeError(error);
      log.warn({ err: kubeErrorForLog(error), retryInMs: delayMs }, `${what} failed (${reason}); retrying in ${delayMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, delayMs));
    }
  }
}
