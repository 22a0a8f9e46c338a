/**
 * What a Pod CREATE costs the control plane, per process (issue 27): the CPU
 * time (user + system, /proc/PID/stat) of every process of the `apiserver`
 * part, summed over each path's rounds and divided by the Pods it created.
 * With the clients in a closed loop the machine's cores are saturated, so
 * latency follows the total; the per-process split says where it goes.
 */
import { fmt } from './format.js';
import { readCpuSeconds } from './processes.js';

/** The processes measured, in the order the table shows them. */
export const CPU_PROCESSES = ['kube-apiserver', 'etcd', 'kube-controller-manager', 'injector', 'floor webhook', 'policy controller', 'load clients'] as const;
export type CpuProcess = (typeof CPU_PROCESSES)[number];

/** PIDs of the measured processes; `load clients` is this process (the Pod loops run in it). */
export type CpuPids = Partial<Record<Exclude<CpuProcess, 'load clients'>, number | undefined>>;

export type CpuSeconds = Record<CpuProcess, number>;

export function zeroCpu(): CpuSeconds {
  return Object.fromEntries(CPU_PROCESSES.map((name) => [name, 0])) as CpuSeconds;
}

function ownCpuSeconds(): number {
  const usage = process.cpuUsage();
  return (usage.user + usage.system) / 1e6;
}

/** Each process's CPU seconds so far (0 for a process gone or not started). */
export function readCpu(pids: CpuPids): CpuSeconds {
  const now = zeroCpu();
  for (const [name, pid] of Object.entries(pids) as [Exclude<CpuProcess, 'load clients'>, number | undefined][]) {
    if (pid === undefined) continue;
    try {
      now[name] = readCpuSeconds(pid);
    } catch {
      now[name] = 0;
    }
  }
  now['load clients'] = ownCpuSeconds();
  return now;
}

/** INTO += AFTER − BEFORE, per process. */
export function addCpu(into: CpuSeconds, before: CpuSeconds, after: CpuSeconds): void {
  for (const name of CPU_PROCESSES) into[name] += Math.max(0, after[name] - before[name]);
}

/** CPU milliseconds per Pod, per process and in total, as the results record them. */
export interface CpuPerPod {
  readonly msPerPod: Record<CpuProcess, number>;
  readonly totalMsPerPod: number;
}

export function cpuPerPod(seconds: CpuSeconds, pods: number): CpuPerPod {
  const msPerPod = zeroCpu();
  let total = 0;
  for (const name of CPU_PROCESSES) {
    msPerPod[name] = pods === 0 ? NaN : (seconds[name] * 1000) / pods;
    total += msPerPod[name];
  }
  return { msPerPod, totalMsPerPod: total };
}

/** The table's rows (header first): a row per path, a column per process, then the total. */
export function cpuRows(paths: readonly { readonly description: string; readonly cpu: CpuPerPod | undefined }[]): string[][] {
  const rows = [['CPU ms per Pod', ...CPU_PROCESSES, 'total']];
  for (const path of paths) {
    if (path.cpu === undefined) continue;
    const cpu = path.cpu;
    rows.push([path.description, ...CPU_PROCESSES.map((name) => fmt.ms(cpu.msPerPod[name])), fmt.ms(cpu.totalMsPerPod)]);
  }
  return rows;
}
