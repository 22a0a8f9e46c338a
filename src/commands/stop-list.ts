/**
 * What has started so far, each with its stop. Stopping goes in reverse
 * order of starting (the server first, so no request reaches a stopped
 * watch), once, and whatever fails to stop does not keep the rest running.
 */
export class StopList {
  readonly #stops: (() => void | Promise<void>)[] = [];

  /** Records a started part; `stop` runs when the list is stopped. */
  add(stop: () => void | Promise<void>): void {
    this.#stops.push(stop);
  }

  /** Stops every part recorded, the latest first; rethrows the first failure once all have been stopped. */
  async stopAll(): Promise<void> {
    const failures: unknown[] = [];
    for (let stop = this.#stops.pop(); stop !== undefined; stop = this.#stops.pop()) {
      try {
        await stop();
      } catch (error) {
        failures.push(error);
      }
    }
    if (failures.length > 0) throw failures[0];
  }
}
