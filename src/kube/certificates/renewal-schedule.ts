import type { Logger } from 'pino';
import { backoffDelayMs, type Backoff } from '../api/index.js';

/**
 * When the certificate check runs: at start, every interval (expiry), when
 * asked (an event), and after a failure with capped backoff. Runs never
 * overlap: one asked for while another runs runs again after it.
 */
export class RenewalSchedule {
  readonly #check: () => Promise<void>;
  readonly #intervalMs: number;
  readonly #backoff: Backoff;
  readonly #log: Logger;
  readonly #onFailure: (error: unknown, retryInMs: number, failures: number) => void;
  #failures = 0;
  #timer: NodeJS.Timeout | undefined;
  #retryTimer: NodeJS.Timeout | undefined;
  #running: Promise<void> | undefined;
  #again = false;
  #stopped = false;

  constructor(options: {
    /** One check; a rejection is a failure, retried. */
    check: () => Promise<void>;
    intervalMs: number;
    backoff: Backoff;
    log: Logger;
    /** Told of each failure (not once stopped), before its retry is scheduled. */
    onFailure: (error: unknown, retryInMs: number, failures: number) => void;
  }) {
    this.#check = options.check;
    this.#intervalMs = options.intervalMs;
    this.#backoff = options.backoff;
    this.#log = options.log;
    this.#onFailure = options.onFailure;
  }

  get stopped(): boolean {
    return this.#stopped;
  }

  /** Starts the periodic check (the first run is the caller's: `run`). */
  start(): void {
    this.#stopped = false;
    this.#timer = setInterval(() => this.request('periodic expiry check'), this.#intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    this.#stopped = true;
    clearInterval(this.#timer);
    clearTimeout(this.#retryTimer);
  }

  /** A check soon, for WHY (logged), unless stopped. */
  request(why: string): void {
    if (this.#stopped) return;
    this.#log.debug({ why }, 'checking certificates');
    void this.run();
  }

  /** One check now; resolves when it (and any asked for meanwhile) has run, failed or not. */
  run(): Promise<void> {
    if (this.#running !== undefined) {
      this.#again = true;
      return this.#running;
    }
    this.#running = (async () => {
      do {
        this.#again = false;
        await this.#runOnce();
      } while (this.#again && !this.#stopped);
    })().finally(() => {
      this.#running = undefined;
    });
    return this.#running;
  }

  async #runOnce(): Promise<void> {
    clearTimeout(this.#retryTimer);
    this.#retryTimer = undefined;
    try {
      await this.#check();
      this.#failures = 0;
    } catch (error) {
      if (this.#stopped) return;
      const delayMs = backoffDelayMs(this.#backoff, this.#failures);
      this.#failures += 1;
      this.#onFailure(error, delayMs, this.#failures);
      this.#retryTimer = setTimeout(() => void this.run(), delayMs);
      this.#retryTimer.unref();
    }
  }
}
