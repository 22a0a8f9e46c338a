import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Readable } from 'node:stream';
import { runCli } from '../../src/cli.js';

/** `envoy-injector ARGS` in process, with STDIN, its exit code and what it wrote. */
export async function runCliCaptured(args: string[], stdin = ''): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const code = await runCli(args, {
    stdin: Readable.from([stdin]),
    stdout: { write: (chunk: string) => (stdout += chunk) },
    stderr: { write: (chunk: string) => (stderr += chunk) },
  });
  return { code, stdout, stderr };
}

/** CONTENT in a new file NAME of a fresh temporary folder; its path. */
export function tempFile(name: string, content: string): string {
  const path = join(mkdtempSync(join(tmpdir(), 'ei-cli-')), name);
  writeFileSync(path, content);
  return path;
}
