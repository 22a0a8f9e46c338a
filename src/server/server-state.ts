import type { CertificateInfo } from '../tls/certificates.js';
import type { TemplateStore } from '../state/template-store.js';

export interface Readiness {
  readonly ready: boolean;
  readonly checks: {
    readonly template: 'loaded' | 'missing';
    readonly tls: 'loaded' | 'missing';
    readonly draining: boolean;
    /** One entry per cluster condition (see ServerState.addCheck): `ok`, or what is wrong. */
    readonly [condition: string]: string | boolean;
  };
  /** Why the server is not ready, one sentence each for an operator; empty when ready. */
  readonly problems: readonly string[];
  /** Seconds since the cluster watches were last in sync, when watching. */
  readonly staleSeconds?: number;
}

/** A condition readiness waits for: undefined when met, else a sentence saying what is wrong. */
export type ReadinessCheck = () => string | undefined;

/** What readiness depends on, in one place. */
export class ServerState {
  draining = false;
  tls: CertificateInfo | undefined;
  /** The server's native-sidecar default; `--native-sidecar auto` updates it from the cluster. */
  nativeSidecar = false;
  /** Replaced by the cluster watches; undefined when not watching. */
  staleSeconds: () => number | undefined = () => undefined;
  readonly #checks = new Map<string, ReadinessCheck>();

  constructor(readonly templates: TemplateStore) {}

  /** Adds a condition readiness waits for (the Namespace watch, the caBundle, node versions). */
  addCheck(name: string, check: ReadinessCheck): void {
    this.#checks.set(name, check);
  }

  readiness(): Readiness {
    const problems: string[] = [];
    const template = this.templates.current === undefined ? 'missing' : 'loaded';
    if (template === 'missing') problems.push('no valid sidecar template is loaded yet');
    const tls = this.tls === undefined ? 'missing' : 'loaded';
    if (tls === 'missing') problems.push('no serving certificate is loaded yet');
    if (this.draining) problems.push('shutting down');
    const conditions: Record<string, string> = {};
    for (const [name, check] of this.#checks) {
      const problem = check();
      conditions[name] = problem ?? 'ok';
      if (problem !== undefined) problems.push(problem);
    }
    const checks = { template, tls, draining: this.draining, ...conditions } as const;
    const ready = problems.length === 0;
    const staleSeconds = this.staleSeconds();
    return staleSeconds === undefined ? { ready, checks, problems } : { ready, checks, problems, staleSeconds };
  }
}
