import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { SERVE_HELP } from '../src/commands/serve-settings.js';
import { repoFile } from './helpers/fixtures.js';

/** `serve --help`'s flags and the environment variable beside each. */
function helpFlags(): Map<string, string> {
  const flags = new Map<string, string>();
  for (const match of SERVE_HELP.matchAll(/^ {2}(--[a-z-]+)(?: [A-Z]+)?\s+([A-Z][A-Z_]+)\s/gm)) flags.set(match[1] ?? '', match[2] ?? '');
  return flags;
}

/** The README's Flags table: its rows as they render, the table ending at its first line that is not a row. */
function readmeTable(): { rows: string[]; after: string } {
  const readme = repoFile('README.md');
  const section = readme.slice(readme.indexOf('\n### Flags\n'));
  const lines = section.split('\n');
  const header = lines.findIndex((line) => line.startsWith('| flag | env |'));
  assert.ok(header > 0, 'the README has a Flags table');
  const end = lines.findIndex((line, index) => index > header && !line.startsWith('|'));
  // What follows the table, up to the next heading: a row there renders as text, not in the table.
  const next = lines.findIndex((line, index) => index > end && line.startsWith('#'));
  return { rows: lines.slice(header + 2, end), after: lines.slice(end, next).join('\n') };
}

describe("the README's Flags table", () => {
  it('is one table: no row after a blank line (Markdown ends a table there)', () => {
    const { after } = readmeTable();
    assert.doesNotMatch(after, /^\| `--/m, 'a flag row after the table ends');
  });

  it("names every flag of serve --help with the help's environment variable", () => {
    const documented = new Map<string, string>();
    for (const row of readmeTable().rows) {
      const [flags = '', envs = ''] = row.split(' | ');
      const names = [...flags.matchAll(/`(--[a-z-]+)`/g)].map((match) => match[1] ?? '');
      const variables = [...envs.matchAll(/`([A-Z_]+)`/g)].map((match) => match[1] ?? '');
      names.forEach((name, index) => documented.set(name, variables[index] ?? ''));
    }
    const help = helpFlags();
    assert.ok(help.size >= 30, `${help.size} flags read from serve --help`);
    const missing = [...help].filter(([flag, env]) => documented.get(flag) !== env).map(([flag, env]) => `${flag} (${env})`);
    assert.deepEqual(missing, [], 'flags of serve --help missing from the README table, or with another variable');
    assert.deepEqual([...documented.keys()].filter((flag) => !help.has(flag)), [], 'rows for flags serve does not have');
  });
});
