import { runCliCaptured } from './run-cli.js';

/**
 * docs/reference/cli.md: every command's `--help`, as the CLI prints it.
 * test/docs-references.test.ts fails when the file differs from what the CLI
 * prints now (UPDATE_GOLDEN=1 rewrites it).
 */
export const CLI_REFERENCE_PATH = 'docs/reference/cli.md';

export const COMMANDS = ['serve', 'inject', 'explain', 'status', 'policy', 'certs', 'check-capture', 'cni-agent'] as const;
export type CommandName = (typeof COMMANDS)[number];

async function helpOf(args: string[]): Promise<string> {
  const { code, stdout } = await runCliCaptured(args);
  if (code !== 0) throw new Error(`envoy-injector ${args.join(' ')} exited ${code}`);
  return stdout;
}

/** Each command's `--help`. */
export async function commandHelps(): Promise<Map<CommandName, string>> {
  const helps = new Map<CommandName, string>();
  for (const command of COMMANDS) helps.set(command, await helpOf([command, '--help']));
  return helps;
}

/** The flags a help text defines: its option lines (`  -f, --filename FILE ...`), not flags its prose names. */
export function definedFlags(help: string): Set<string> {
  const flags = new Set<string>();
  for (const match of help.matchAll(/^ {2,}(?:-[a-zA-Z], )?(--[a-z][a-z0-9-]*)/gm)) flags.add(match[1] ?? '');
  return flags;
}

export async function renderCliReference(): Promise<string> {
  const lines = [
    '# Command-line reference',
    '',
    '<!-- Generated from each command\'s --help by test/helpers/cli-reference.ts: do not edit.',
    '     UPDATE_GOLDEN=1 node --import tsx --test test/docs-references.test.ts rewrites it. -->',
    '',
    'What `envoy-injector` and each of its commands print for `--help`: every flag,',
    'its environment variable where it has one, and its default. The guides say',
    'when to use which.',
    '',
    '```text',
    (await helpOf(['--help'])).trimEnd(),
    '```',
  ];
  for (const [command, help] of await commandHelps()) lines.push('', `## envoy-injector ${command}`, '', '```text', help.trimEnd(), '```');
  return `${lines.join('\n')}\n`;
}
