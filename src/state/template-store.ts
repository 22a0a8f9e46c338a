import type { Logger } from 'pino';
import { TemplateError } from '../errors.js';
import { parseTemplateData, type TemplateSet } from '../injection/index.js';

/**
 * Where the store reports its changes. The server's metrics implement it; an
 * interface here keeps this room free of server code.
 */
export interface TemplateReloadRecorder {
  /** A new set went live: count it, stamp the time, replace the per-template series. */
  templatesApplied(templates: Iterable<{ name: string; hash: string }>): void;
  /** An update was refused (invalid) or the source deleted; the last good set stays. */
  templateReloadKept(result: 'rejected' | 'deleted'): void;
}

/**
 * The live template set. A valid update replaces it as a whole (a request
 * reads it once and keeps that set to its end); an invalid update or a
 * deletion keeps the last good set, loudly.
 */
export class TemplateStore {
  #current: TemplateSet | undefined;
  readonly #metrics: TemplateReloadRecorder;
  readonly #log: Logger;
  readonly #listeners: ((templates: TemplateSet) => void)[] = [];

  constructor(metrics: TemplateReloadRecorder, log: Logger) {
    this.#metrics = metrics;
    this.#log = log;
  }

  get current(): TemplateSet | undefined {
    return this.#current;
  }

  /** Validates ConfigMap data from `source` and applies it; returns whether it was applied. */
  update(data: Readonly<Record<string, unknown>>, source: string): boolean {
    let templates: TemplateSet;
    try {
      templates = parseTemplateData(data);
    } catch (error) {
      if (!(error instanceof TemplateError)) throw error;
      this.#metrics.templateReloadKept('rejected');
      this.#log.error(
        { source, problems: error.problems, keeping: this.#describe() },
        `invalid sidecar template from ${source}, keeping the last good set: ${error.message}`,
      );
      return false;
    }
    this.set(templates, source);
    return true;
  }

  /** Calls `listener` with every set applied from now on (policy mode compiles each one). */
  onApplied(listener: (templates: TemplateSet) => void): void {
    this.#listeners.push(listener);
  }

  /** Applies an already validated set (a template file, the bundled default). */
  set(templates: TemplateSet, source: string): void {
    this.#current = templates;
    for (const listener of this.#listeners) listener(templates);
    this.#metrics.templatesApplied(templates.templates.values());
    this.#log.info({ source, templates: this.#describe() }, `sidecar templates loaded from ${source}`);
  }

  /** The source is gone: keep serving the last good set. */
  deleted(source: string): void {
    this.#metrics.templateReloadKept('deleted');
    this.#log.warn(
      { source, keeping: this.#describe() },
      `${source} was deleted; keeping the last good sidecar templates until it is recreated`,
    );
  }

  #describe(): string[] {
    return [...(this.#current?.templates.values() ?? [])].map((template) => `${template.name}@${template.hash}`);
  }
}
