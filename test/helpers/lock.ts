import { mkdir, rm, stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Runs `work` while holding a machine-wide lock named `name` (an atomic
 * `mkdir` in the temp dir), so that test files running in parallel, or two
 * test runs at once, do not download or install the same thing together. A
 * lock older than `staleMs` was left by a killed run and is taken over.
 */
export async function withLock<T>(name: string, work: () => Promise<T>, { waitMs = 240_000, staleMs = 300_000 } = {}): Promise<T> {
  const path = join(tmpdir(), `envoy-injector-${name}.lock`);
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      await mkdir(path);
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const age = await stat(path).then((info) => Date.now() - info.mtimeMs, () => 0);
      if (age > staleMs) {
        await rm(path, { recursive: true, force: true });
        continue;
      }
      if (Date.now() > deadline) throw new Error(`lock ${path} still held after ${waitMs} ms`);
      await sleep(200);
    }
  }
  try {
    return await work();
  } finally {
    await rm(path, { recursive: true, force: true });
  }
}
