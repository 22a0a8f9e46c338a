import { AdmissionregistrationV1beta1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { TemplateSet } from '../injection/index.js';
import { compilePolicy, templatesFingerprint, type PolicySettings } from '../policy/compile-policy.js';
import { backoffDelayMs, type Backoff } from './backoff.js';
import { describeKubeError, kubeErrorForLog } from './kube-errors.js';

/** The field manager of every apply: the policy's fields are ours, and a change by hand is overwritten (force). */
export const POLICY_FIELD_MANAGER = 'envoy-injector';

/**
 * Policy mode's controller: keeps the MutatingAdmissionPolicy equal to the
 * compilation of the latest valid template set, by server-side
 * apply. Only valid sets reach it (the template store keeps the last good one),
 * so an invalid ConfigMap change leaves the last good policy in place. Applies
 * run one at a time; a newer set replaces one still waiting; a failed apply is
 * retried with backoff until it succeeds or a newer set arrives. The binding
 * is not ours: the chart installs it (or `envoy-injector policy` prints it), so
 * that uninstalling turns injection off even if this process never runs again.
 */
export class PolicySync {
  readonly #api: AdmissionregistrationV1beta1Api;
  readonly #settings: PolicySettings;
  readonly #backoff: Backoff;
  readonly #log: Logger;
  #pending: TemplateSet | undefined;
  #running = false;
  #stopped = false;
  #wake: (() => void) | undefined;
  /** The fingerprint of the templates of the policy last applied. */
  #applied: string | undefined;

  constructor(options: { kubeConfig: KubeConfig; settings: PolicySettings; backoff: Backoff; log: Logger }) {
    this.#api = options.kubeConfig.makeApiClient(AdmissionregistrationV1beta1Api);
    this.#settings = options.settings;
    this.#backoff = options.backoff;
    this.#log = options.log;
  }

  /** Compiles and applies `templates` (soon, in order, the latest wins). */
  apply(templates: TemplateSet): void {
    this.#pending = templates;
    this.#wake?.();
    if (!this.#running) void this.#run();
  }

  /** True when the policy in the cluster was compiled from `templates`. */
  isInSync(templates: TemplateSet | undefined): boolean {
    return templates !== undefined && this.#applied === templatesFingerprint(templates);
  }

  stop(): void {
    this.#stopped = true;
    this.#wake?.();
  }

  async #run(): Promise<void> {
    this.#running = true;
    let failures = 0;
    while (this.#pending !== undefined && !this.#stopped) {
      const templates = this.#pending;
      this.#pending = undefined;
      const { policy } = compilePolicy(templates, this.#settings);
      const name = String((policy['metadata'] as { name: string }).name);
      try {
        await this.#api.patchMutatingAdmissionPolicy({ name, body: policy, fieldManager: POLICY_FIELD_MANAGER, force: true }, setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply));
        failures = 0;
        this.#applied = templatesFingerprint(templates);
        this.#log.info({ policy: name, templates: this.#applied }, `MutatingAdmissionPolicy ${name} applied`);
      } catch (error) {
        const delayMs = backoffDelayMs(this.#backoff, failures++);
        this.#log.error(
          { err: kubeErrorForLog(error), policy: name, retryInMs: delayMs },
          `applying MutatingAdmissionPolicy ${name} failed (${describeKubeError(error)}); the policy in the cluster stays as it was; retrying in ${delayMs} ms`,
        );
        // Retry this set unless a newer one arrives meanwhile.
        this.#pending ??= templates;
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delayMs);
          this.#wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.#wake = undefined;
      }
    }
    this.#running = false;
  }
}
