import { PatchStrategy, setHeaderOptions, type AdmissionregistrationV1Api, type V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { caBundleApply, CA_BUNDLE_FIELD_MANAGER, splitPem } from './ca-bundle.js';
import { kubeErrorStatus } from '../api/index.js';

/**
 * The webhook configuration's caBundle, additively: a CA is added to every
 * webhook that lacks it and never removed while it is valid (another replica
 * may still serve a certificate it signed). Knows when each CA was first seen
 * trusted, so that a replica switching CAs waits for the API servers' copies
 * of the configuration to catch up.
 */
export class CaBundlePatcher {
  readonly #admission: AdmissionregistrationV1Api;
  readonly #webhookConfigName: string;
  readonly #settleMs: number;
  readonly #log: Logger;
  readonly #now: () => Date;
  /** When each CA was first seen trusted by every webhook (Date.now()): the settle wait counts from there. */
  readonly #caSeenAt = new Map<string, number>();

  constructor(options: { admission: AdmissionregistrationV1Api; webhookConfigName: string; settleMs: number; log: Logger; now: () => Date }) {
    this.#admission = options.admission;
    this.#webhookConfigName = options.webhookConfigName;
    this.#settleMs = options.settleMs;
    this.#log = options.log;
    this.#now = options.now;
  }

  /**
   * Adds the CAs of `caBundle` (its first, `caPem`, the one to serve) to every webhook's caBundle that lacks one, keeping the
   * CAs already there that are valid; `onRead` sees each configuration read. The write is a server-side apply of the
   * caBundles alone, under our field manager: the caBundle is ours, every other field the chart's, so a GitOps tool applying
   * the chart (which renders no caBundle) neither conflicts with nor removes it.
   */
  async ensureTrusted(caBundle: string, caPem: string, onRead: (config: V1MutatingWebhookConfiguration) => void): Promise<void> {
    const wanted = splitPem(caBundle);
    for (let attempt = 1; ; attempt++) {
      const config = await this.#read();
      // Not installed yet (Helm may create it after the Deployment): nothing calls us, and the watch will see it arrive.
      if (config === undefined) return;
      onRead(config);
      const apply = caBundleApply(config, wanted, this.#now());
      if (apply === undefined) {
        this.#sawTrusted(caPem);
        return;
      }
      try {
        await this.#admission.patchMutatingWebhookConfiguration(
          { name: this.#webhookConfigName, body: apply.body, fieldManager: CA_BUNDLE_FIELD_MANAGER, force: true },
          setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply),
        );
      } catch (error) {
        // 409: the configuration changed since we read it (the resourceVersion precondition); read again.
        if (kubeErrorStatus(error) === 409 && attempt < 5) continue;
        throw error;
      }
      this.#log.info({ webhooks: apply.changed }, `caBundle of MutatingWebhookConfiguration ${this.#webhookConfigName} updated`);
      this.#sawTrusted(caPem);
      return;
    }
  }

  /** Waits until CAPEM has been in the caBundle for the settle time, counted from when this replica first saw it there. */
  async settle(caPem: string): Promise<void> {
    const since = this.#caSeenAt.get(caPem.trim()) ?? Date.now();
    const waitMs = since + this.#settleMs - Date.now();
    if (waitMs > 0) await new Promise((resolve) => setTimeout(resolve, waitMs));
  }

  /** Notes when CAPEM was first seen in every webhook's caBundle (written by us, or found there). */
  #sawTrusted(caPem: string): void {
    const ca = caPem.trim();
    if (!this.#caSeenAt.has(ca)) this.#caSeenAt.set(ca, Date.now());
  }

  async #read(): Promise<V1MutatingWebhookConfiguration | undefined> {
    try {
      return await this.#admission.readMutatingWebhookConfiguration({ name: this.#webhookConfigName });
    } catch (error) {
      if (kubeErrorStatus(error) === 404) return undefined;
      throw error;
    }
  }
}
