import type { V1MutatingWebhookConfiguration } from '@kubernetes/client-node';
import { describeCertificate } from '../../tls/certificates.js';

/**
 * The webhooks' caBundle in `--cert-mode auto`: which CAs it holds, and the
 * write that adds ours. The caBundle is the injector's field alone: the chart
 * renders none, and the injector writes it by server-side apply under its own
 * field manager, so a GitOps tool that applies or diffs the chart's
 * configuration (Flux, Argo CD with server-side diff) neither conflicts with
 * it nor removes it, and sees no difference.
 */

/** Who owns the webhooks' caBundle in managedFields (GitOps tools can be told to ignore its fields). */
export const CA_BUNDLE_FIELD_MANAGER = 'envoy-injector';

export function splitPem(bundle: string): string[] {
  return bundle.match(/-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g) ?? [];
}

function decodeBundle(encoded: string | undefined): string {
  return Buffer.from(String(encoded ?? ''), 'base64').toString('utf8');
}

/** Every webhook of `config` trusts `caPem`. */
export function trustsCa(config: V1MutatingWebhookConfiguration, caPem: string): boolean {
  const ca = caPem.trim();
  return (config.webhooks ?? []).every((webhook) => splitPem(decodeBundle(webhook.clientConfig?.caBundle)).includes(ca));
}

export function stillValid(pem: string, now: Date): boolean {
  try {
    return describeCertificate(pem).notAfter.getTime() > now.getTime();
  } catch {
    return false;
  }
}

/**
 * The server-side apply that gives every webhook of CONFIG the CAs WANTED
 * (plus the valid CAs it already trusts), or undefined when each has them.
 * It names every webhook, not only those that change: a field an applier
 * owned and leaves out is removed. The resourceVersion read makes it
 * conditional, so a CA another replica added meanwhile is never lost.
 */
export function caBundleApply(config: V1MutatingWebhookConfiguration, wanted: readonly string[], now: Date): { body: object; changed: number } | undefined {
  let changed = 0;
  const webhooks = (config.webhooks ?? []).map((webhook) => {
    const existing = splitPem(decodeBundle(webhook.clientConfig?.caBundle));
    if (wanted.every((pem) => existing.includes(pem))) return { name: webhook.name, clientConfig: { caBundle: webhook.clientConfig?.caBundle ?? '' } };
    changed += 1;
    const bundle = [...new Set([...wanted, ...existing.filter((pem) => stillValid(pem, now))])].join('\n') + '\n';
    return { name: webhook.name, clientConfig: { caBundle: Buffer.from(bundle).toString('base64') } };
  });
  if (changed === 0) return undefined;
  const metadata = { name: config.metadata?.name, resourceVersion: config.metadata?.resourceVersion };
  return { body: { apiVersion: 'admissionregistration.k8s.io/v1', kind: 'MutatingWebhookConfiguration', metadata, webhooks }, changed };
}
