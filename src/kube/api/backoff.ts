export interface Backoff {
  readonly initialMs: number;
  readonly maxMs: number;
  /** A watch that ends cleanly sooner than this after opening did no useful work and counts as a failure (default 1 s). */
  readonly quickCloseMs?: number;
}

/** client-go's defaults are close: start fast, cap at half a minute. */
export const DEFAULT_BACKOFF: Backoff = { initialMs: 250, maxMs: 30_000 };

/** The delay before retry number `failures` (0-based): exponential, capped, with jitter over its upper half. */
export function backoffDelayMs(backoff: Backoff, failures: number): number {
  const ceiling = Math.min(backoff.maxMs, backoff.initialMs * 2 ** failures);
  return Math.round(ceiling / 2 + (Math.random() * ceiling) / 2);
}
