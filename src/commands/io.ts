import { readFile } from 'node:fs/promises';
import { text } from 'node:stream/consumers';
import { InjectorError, TemplateError, UsageError } from '../errors.js';
import { BUNDLED_TEMPLATE_DATA, parseTemplateData, parseTemplateFile, type TemplateSet } from '../injection/index.js';

/** Where a command reads and writes; tests pass their own. */
export interface CommandIo {
  readonly stdin: NodeJS.ReadableStream;
  readonly stdout: { write(chunk: string): unknown };
  readonly stderr: { write(chunk: string): unknown };
}

/** A file's text, or standard input for `-`. */
export async function readInput(path: string, io: CommandIo): Promise<string> {
  if (path === '-') return text(io.stdin);
  try {
    return await readFile(path, 'utf8');
  } catch (error) {
    throw new UsageError(`cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? String(error)}`);
  }
}

/** The templates of `--template-file`, or the bundled seed template. */
export async function loadTemplates(templateFile: string | undefined, io: CommandIo, templateName?: string): Promise<TemplateSet> {
  let templates: TemplateSet;
  if (templateFile === undefined) templates = parseTemplateData(BUNDLED_TEMPLATE_DATA);
  else {
    const content = await readInput(templateFile, io);
    try {
      templates = parseTemplateFile(content);
    } catch (error) {
      if (error instanceof TemplateError) throw new TemplateError(error.problems.map((problem) => `${templateFile}: ${problem}`));
      throw error;
    }
  }
  if (templateName === undefined) return templates;
  const chosen = templates.templates.get(templateName);
  if (chosen === undefined) {
    throw new UsageError(`--template ${templateName}: no such template (known: ${[...templates.templates.keys()].join(', ')})`);
  }
  return { templates: templates.templates, defaultTemplate: chosen };
}

/** One line on stderr for an error a user can act on; a stack only for bugs. */
export function reportError(error: unknown, io: CommandIo): number {
  if (error instanceof InjectorError) {
    io.stderr.write(`envoy-injector: ${error.message}\n`);
    return error instanceof UsageError ? 2 : 1;
  }
  io.stderr.write(`envoy-injector: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  return 1;
}
