import type { CertificateInfo } from '../tls/certificates.js';
import type { TemplateStore } from '../state/template-store.js';

export interface Readiness {
  readonly ready: boolean;
  readonly checks: {
    readonly template: 'loaded' | 'missing';
    readonly tls: 'loaded' | 'missing';
    readonly draining: boolean;
  };
  /** Seconds since the cluster watches were last in sync, when watching. */
  readonly staleSeconds?: number;
}

/** What readiness depends on, in one place. */
export class ServerState {
  draining = false;
  tls: CertificateInfo | undefined;
  /** The server's native-sidecar default; `--native-sidecar auto` updates it from the cluster version. */
  nativeSidecar = false;
  /** Replaced by the cluster watches; undefined when not watching. */
  staleSeconds: () => number | undefined = () => undefined;

  constructor(readonly templates: TemplateStore) {}

  readiness(): Readiness {
    const checks = {
      template: this.templates.current === undefined ? 'missing' : 'loaded',
      tls: this.tls === undefined ? 'missing' : 'loaded',
      draining: this.draining,
    } as const;
    const ready = checks.template === 'loaded' && checks.tls === 'loaded' && !checks.draining;
    const staleSeconds = this.staleSeconds();
    return staleSeconds === undefined ? { ready, checks } : { ready, checks, staleSeconds };
  }
}
