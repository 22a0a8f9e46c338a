import { Annotations, type ManifestReport } from '../injection/index.js';

/** What explain says of the proxy's part in the Pod's life (docs/design.md §13). */
export interface LifecycleExplanation {
  /** The app waits for the proxy: a startupProbe (native) or the proxy first with a postStart wait (classic). */
  readonly holdApplication: boolean;
  /** Classic sidecars: the preStop drain, fitted to the grace period; 0: none. */
  readonly drainSeconds: number;
  readonly message: string;
}

export function explainLifecycle(report: ManifestReport): LifecycleExplanation | undefined {
  const { lifecycle, decision } = report;
  const settings = decision.inject ? decision.template.proxyLifecycle : undefined;
  if (lifecycle === undefined || settings === undefined || !decision.inject) return undefined;
  const native = decision.nativeSidecar;
  const start = !lifecycle.hold
    ? `the app starts without waiting for the proxy (${Annotations.holdApplication} or the template's holdApplication)`
    : native
      ? `the app starts once the proxy is ready (startupProbe on :${settings.readyPort}${settings.readyPath}, up to ${settings.startupSeconds} s)`
      : `the proxy starts first, the app once it is ready (postStart waits for 127.0.0.1:${settings.adminPort}/ready, up to ${settings.startupSeconds} s)`;
  const stop = native
    ? 'the kubelet stops the proxy after the app'
    : lifecycle.drainSeconds > 0
      ? `on shutdown the proxy drains for ${lifecycle.drainSeconds} s before its SIGTERM (preStop)`
      : 'no drain: the grace period leaves no time for one';
  return { holdApplication: lifecycle.hold, drainSeconds: lifecycle.drainSeconds, message: `${start}; ${stop}` };
}
