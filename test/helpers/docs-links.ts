import { remark } from 'remark';
import remarkGfm from 'remark-gfm';
import remarkValidateLinks from 'remark-validate-links';
import { engine, type Options as EngineOptions } from 'unified-engine';
import { ROOT } from './fixtures.js';

/** The repository as hosted: full URLs into it (say, a chart value's default) are checked as relative ones. */
export const REPOSITORY = 'https://github.com/envoy-injector/envoy-injector';

export interface LinkProblem {
  readonly file: string;
  readonly line: number;
  readonly message: string;
}

/**
 * remark-validate-links over FILES together, as its CLI runs it (through
 * unified-engine, the only way it sees the headings of other files): every
 * link to a file or a heading, relative or into REPOSITORY, must resolve.
 */
export function checkLinks(files: readonly string[]): Promise<LinkProblem[]> {
  return new Promise((resolve, reject) => {
    engine(
      {
        processor: remark().use(remarkGfm),
        // unified-engine types its plugins loosely: the options are remark-validate-links' own.
        plugins: [[remarkValidateLinks, { repository: REPOSITORY, root: ROOT }]] as unknown as EngineOptions['plugins'],
        files: [...files],
        cwd: ROOT,
        extensions: ['md'],
        detectConfig: false,
        detectIgnore: false,
        out: false,
        output: false,
        silent: true,
        streamError: { write: () => true } as unknown as NodeJS.WritableStream,
      },
      (error, _code, context) => {
        if (error !== undefined && error !== null) return reject(error);
        const problems: LinkProblem[] = [];
        for (const file of context?.files ?? []) {
          for (const message of file.messages) problems.push({ file: file.path, line: message.line ?? 0, message: message.reason });
        }
        resolve(problems);
      },
    );
  });
}
