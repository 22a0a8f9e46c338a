/**
 * Child processes of the bench: our server, the floor server, load workers.
 * Every child is tracked so that an interrupted or failed run leaves none behind.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../', import.meta.url));

const children = new Set<ChildProcess>();

/** Kills every child still running (on exit, on a signal, on a harness error). */
export function killAllChildren(): void {
  for (const child of children) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  }
  children.clear();
}

export interface ServerProcess {
  readonly pid: number;
  readonly port: number;
  readonly stderr: string[];
  readonly exited: Promise<number | null>;
  /** SIGTERM, then SIGKILL after `graceMs`. */
  stop(graceMs?: number): Promise<void>;
}

/**
 * Spawns `node ARGS` in the repository and resolves once it prints a JSON
 * line whose msg starts with `readyPrefix` and that carries a numeric port
 * (our server's "envoy-injector serving https on port N", the floor's own).
 * ENV is added to this process's environment.
 */
export async function startServer(args: readonly string[], readyPrefix: string, timeoutMs = 15_000, env: Readonly<Record<string, string>> = {}, launcher: readonly string[] = []): Promise<ServerProcess> {
  // LAUNCHER (e.g. valgrind and its options) runs node in place: the child's pid is node's.
  const [command, ...launcherArgs] = [...launcher, process.execPath];
  const child = spawn(command ?? process.execPath, [...launcherArgs, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, ...env } });
  children.add(child);
  const stderr: string[] = [];
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      children.delete(child);
      resolve(code);
    }),
  );
  createInterface({ input: child.stderr }).on('line', (line) => stderr.push(line));
  const lines = createInterface({ input: child.stdout });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${args.join(' ')}: not listening after ${timeoutMs} ms\n${stderr.join('\n')}`)), timeoutMs);
    // Keeps reading stdout for the whole life of the process: a full pipe would block its logger.
    lines.on('line', (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      if (typeof entry['port'] === 'number' && String(entry['msg']).startsWith(readyPrefix)) {
        clearTimeout(timer);
        resolve(entry['port']);
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`${args.join(' ')}: exited with ${code} before listening\n${stderr.join('\n')}`));
    });
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`${args.join(' ')}: no pid`);
  return {
    pid,
    port,
    stderr,
    exited,
    stop: async (graceMs = 5_000) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}

/** Runs `node ARGS` to completion and returns its stdout; fails on a non-zero exit or after `timeoutMs`. */
export async function runNode(args: readonly string[], timeoutMs: number): Promise<string> {
  const child = spawn(process.execPath, [...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  const stdout: Buffer[] = [];
  const stderr: Buffer[] = [];
  child.stdout.on('data', (chunk: Buffer) => stdout.push(chunk));
  child.stderr.on('data', (chunk: Buffer) => stderr.push(chunk));
  const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
  const code = await new Promise<number | null>((resolve) => child.once('exit', (exitCode) => resolve(exitCode)));
  clearTimeout(timer);
  children.delete(child);
  if (code !== 0) throw new Error(`node ${args.join(' ')}: exited with ${code ?? 'a signal'}\n${Buffer.concat(stderr).toString()}`);
  return Buffer.concat(stdout).toString();
}

export interface MemoryStatus {
  /** Resident set size now, bytes. */
  readonly rss: number;
  /** Peak resident set size ("high water mark") since start or the last reset, bytes. */
  readonly hwm: number;
}

/** VmRSS and VmHWM of a live process, from /proc/PID/status (Linux). */
export function readMemory(pid: number): MemoryStatus {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kib = (field: string): number => {
    const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status);
    if (match === null) throw new Error(`/proc/${pid}/status: no ${field}`);
    return Number(match[1]) * 1024;
  };
  return { rss: kib('VmRSS'), hwm: kib('VmHWM') };
}

/** Clock ticks per second of /proc/PID/stat times (USER_HZ: 100 on every Linux we run on). */
const CLOCK_TICKS = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/**
 * CPU time (user + system) a live process has used, in seconds. Measured per
 * round, it gives CPU per request: unlike req/s, hardly moved by other work
 * on a shared machine.
 */
export function readCpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the parenthesised command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
}

/** CPU time the whole machine spent busy (every core; steal included: other guests count as other work), seconds. */
export function readMachineBusySeconds(): number {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0] ?? '';
  // cpu user nice system idle iowait irq softirq steal ...
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  return ((user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0)) / CLOCK_TICKS;
}

/** Samples a process's memory every `intervalMs` until stopped; keeps the highest VmRSS and VmHWM seen. */
export class MemorySampler {
  #peakRss = 0;
  #hwm = 0;
  readonly #timer: NodeJS.Timeout;

  constructor(readonly pid: number, intervalMs = 200) {
    this.sample();
    this.#timer = setInterval(() => this.sample(), intervalMs);
    this.#timer.unref();
  }

  sample(): MemoryStatus | undefined {
    try {
      const status = readMemory(this.pid);
      this.#peakRss = Math.max(this.#peakRss, status.rss);
      this.#hwm = Math.max(this.#hwm, status.hwm);
      return status;
    } catch {
      return undefined; // the process has exited: keep what was seen
    }
  }

  /** Takes a last sample and stops. */
  stop(): { peakRss: number; hwm: number } {
    this.sample();
    clearInterval(this.#timer);
    return { peakRss: this.#peakRss, hwm: this.#hwm };
  }
}
