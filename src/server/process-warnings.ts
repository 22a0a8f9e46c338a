import type { Logger } from 'pino';

/**
 * Sends the process's warnings (a dependency's deprecation: on Node 24,
 * @kubernetes/client-node's fetch calls `url.parse`)
 * to LOG as JSON lines at `warn`, in place of Node's own printer, whose
 * plain-text lines on stderr a log pipeline reading JSON cannot parse.
 */
export function logProcessWarnings(log: Logger): void {
  process.removeAllListeners('warning');
  process.on('warning', (warning: Error & { code?: string }) => {
    log.warn({ warning: { name: warning.name, ...(warning.code === undefined ? {} : { code: warning.code }) } }, warning.message);
  });
}
