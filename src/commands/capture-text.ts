import type { CaptureDecision, CaptureMode } from '../injection/index.js';

/** What explain's JSON says of a Pod's traffic capture. */
export interface CaptureExplanation {
  readonly captured: boolean;
  readonly reason: string;
  readonly message: string;
  /** When captured: envoy-init in the Pod, or the node's CNI plugin with a check in the Pod. */
  readonly mode?: CaptureMode;
  /** When captured: what the rules get (docs/design.md §11). */
  readonly rules?: {
    readonly proxyUid: number;
    readonly outboundPort: number;
    readonly inboundPort: number;
    readonly proxyPorts: readonly number[];
    readonly excludeOutboundCidrs: string;
    readonly excludeOutboundPorts: string;
    readonly excludeInboundPorts: string;
    readonly includeInboundPorts: string;
  };
}

export function explainCapture(capture: CaptureDecision): CaptureExplanation {
  if (!capture.capture) return { captured: false, reason: capture.reason, message: capture.message };
  const { settings, exclusions } = capture;
  return {
    captured: true,
    reason: capture.reason,
    message: capture.message,
    mode: capture.mode,
    rules: { proxyUid: settings.proxyUid, outboundPort: settings.outboundPort, inboundPort: settings.inboundPort, proxyPorts: settings.proxyPorts, ...exclusions },
  };
}

/** The decision in one line, then (when captured) the effective rules, one per line. */
export function captureLines(capture: CaptureExplanation): string[] {
  const how = capture.mode === undefined ? '' : ` in ${capture.mode} mode`;
  const head = `traffic capture ${capture.captured ? 'ON' : 'off'}${how}: ${capture.message} [reason ${capture.reason}]`;
  const { rules } = capture;
  if (rules === undefined) return [head];
  const none = (list: string, empty = 'none'): string => (list === '' ? empty : list);
  const proxyPorts = rules.proxyPorts.join(',');
  return [
    head,
    `outbound TCP -> port ${rules.outboundPort}, except uid ${rules.proxyUid}, loopback, CIDRs ${none(rules.excludeOutboundCidrs)}, ports ${none([proxyPorts, rules.excludeOutboundPorts].filter((list) => list !== '').join(','))}`,
    `inbound TCP -> port ${rules.inboundPort}, ports ${none(rules.includeInboundPorts, 'all')}, except ${none([proxyPorts, rules.excludeInboundPorts].filter((list) => list !== '').join(','))}`,
  ];
}
