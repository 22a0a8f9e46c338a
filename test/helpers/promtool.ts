import { execFile } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';
import type { TestContext } from 'node:test';
import { promisify } from 'node:util';

const run = promisify(execFile);

/**
 * promtool, from Debian's `prometheus` package (.ci/run installs it with apt).
 * Looked up on PATH (or PROMTOOL), never downloaded: CI must have it, a
 * developer's machine may not.
 */
function findPromtool(): string | undefined {
  const candidates = process.env['PROMTOOL'] !== undefined ? [process.env['PROMTOOL']] : (process.env['PATH'] ?? '').split(delimiter).map((dir) => join(dir, 'promtool'));
  return candidates.find((path) => {
    try {
      accessSync(path, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  });
}

const PROMTOOL = findPromtool();
const MISSING = 'promtool not found on PATH (apt-get install prometheus; .ci/run does)';
let announced = false;

/**
 * The promtool path, or undefined after skipping T: locally one `skipped:`
 * line says so; in CI (CI=true) a missing promtool fails the test, since the
 * alerts would go untested.
 */
export function promtoolOrSkip(t: TestContext): string | undefined {
  if (PROMTOOL !== undefined) return PROMTOOL;
  if (process.env['CI'] === 'true') throw new Error(`${MISSING}: CI must run the alert tests`);
  if (!announced) {
    announced = true;
    process.stdout.write(`skipped: promtool tests of the alerts and dashboard queries: ${MISSING}\n`);
  }
  t.skip(MISSING);
  return undefined;
}

export interface PromtoolResult {
  readonly code: number;
  readonly output: string;
}

/** Runs promtool ARGS in CWD; never throws on a non-zero exit (the caller asserts on it). */
export async function promtool(bin: string, args: readonly string[], cwd: string): Promise<PromtoolResult> {
  try {
    const { stdout, stderr } = await run(bin, [...args], { cwd, timeout: 60_000, maxBuffer: 16 * 1024 * 1024 });
    return { code: 0, output: stdout + stderr };
  } catch (error) {
    const failure = error as { code?: number | string; stdout?: string; stderr?: string };
    if (typeof failure.code !== 'number') throw error;
    return { code: failure.code, output: (failure.stdout ?? '') + (failure.stderr ?? '') };
  }
}
