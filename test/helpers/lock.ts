import { mkdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

/** True when no process of this pid exists any more (the holder was killed). */
function isDead(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH';
  }
}

/** Whether the lock at `path` was left by a run that is gone. */
async function isStale(path: string, staleMs: number): Promise<boolean> {
  const holder = Number(await readFile(join(path, 'pid'), 'utf8').catch(() => ''));
  if (Number.isInteger(holder) && holder > 0) return isDead(holder);
  // No pid written (yet, or by an older run): judged by age alone.
  const age = await stat(path).then((info) => Date.now() - info.mtimeMs, () => 0);
  return age > staleMs;
}

/**
 * Runs `work` while holding a machine-wide lock named `name` (an atomic
 * `mkdir` in the temp dir, holding the holder's pid), so that test files
 * running in parallel, or two test runs at once, do not download or install
 * the same thing together, nor start two kubelets on one machine. A lock
 * whose holder died is taken over at once; one without a pid, once older than
 * `staleMs`.
 */
export async function withLock<T>(name: string, work: () => Promise<T>, { waitMs = 240_000, staleMs = 300_000 } = {}): Promise<T> {
  const path = join(tmpdir(), `envoy-injector-${name}.lock`);
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      await mkdir(path);
      await writeFile(join(path, 'pid'), String(process.pid));
      break;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      if (await isStale(path, staleMs)) {
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
