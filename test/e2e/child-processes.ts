import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import type { Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';

/**
 * Child processes of the control plane, each logging to a file and stopped
 * by its PID: on `stop`, and, should a test or the runner die first, on the
 * exit of this process and on SIGINT/SIGTERM.
 */
export interface ManagedProcess {
  readonly name: string;
  readonly child: ChildProcess;
  readonly logFile: string;
  /** Resolves with the exit code (or the signal) once the process is gone. */
  readonly exited: Promise<number | string>;
  /** The last lines of its log, for error messages. */
  tail(lines?: number): Promise<string>;
  /** SIGTERM, then SIGKILL after `graceMs`; resolves when it has exited. */
  stop(graceMs?: number): Promise<void>;
}

const running = new Set<ChildProcess>();
let hooked = false;

function killAllNow(): void {
  for (const child of running) if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  running.clear();
}

function hookExit(): void {
  if (hooked) return;
  hooked = true;
  process.once('exit', killAllNow);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      killAllNow();
      process.exit(signal === 'SIGINT' ? 130 : 143);
    });
  }
}

/** Adds a child started elsewhere to those killed by PID at exit. */
export function trackChild(child: ChildProcess): void {
  hookExit();
  running.add(child);
  child.once('exit', () => running.delete(child));
}

export function startProcess(name: string, bin: string, args: readonly string[], logFile: string): ManagedProcess {
  hookExit();
  const log: WriteStream = createWriteStream(logFile);
  const child = spawn(bin, [...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  // Never what keeps this process alive: `stop`, or the exit hook, ends them.
  child.unref();
  for (const stream of [child.stdout, child.stderr]) (stream as Socket | null)?.unref();
  child.stdout?.pipe(log, { end: false });
  child.stderr?.pipe(log, { end: false });
  const exited = new Promise<number | string>((resolve) => {
    child.once('error', (error) => {
      running.delete(child);
      log.end(`\n${name}: ${error.message}\n`);
      resolve(error.message);
    });
    child.once('close', (code, signal) => {
      running.delete(child);
      log.end();
      resolve(code ?? signal ?? 'unknown');
    });
  });
  return {
    name,
    child,
    logFile,
    exited,
    tail: async (lines = 15) => {
      const text = await readFile(logFile, 'utf8').catch(() => '');
      return text.trimEnd().split('\n').slice(-lines).join('\n');
    },
    stop: async (graceMs = 5_000) => {
      if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return void (await exited);
      // The child is unref'd: without a handle of our own, a script whose only work is this wait would exit mid-stop.
      const keepAlive = setInterval(() => undefined, 1_000);
      try {
        child.kill('SIGTERM');
        const result = await Promise.race([exited, sleep(graceMs, 'timeout' as const)]);
        if (result === 'timeout') child.kill('SIGKILL');
        await exited;
      } finally {
        clearInterval(keepAlive);
      }
    },
  };
}
