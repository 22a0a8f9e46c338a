/**
 * What a kubelet and containerd change on the machine, recorded before the
 * node starts and undone after it stops, also when the run before crashed:
 * the record is a file in the tier's own directory (NODE_DIR/host.json),
 * written before the first change, so the next run finds it and restores
 * what it says. Only what is the tier's own is removed: processes by pid and
 * start time, mounts under NODE_DIR, the bridge BRIDGE, the cgroup
 * CGROUP_ROOT, files that name the tier's network or point into NODE_DIR,
 * folders that did not exist before.
 */
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdir, readFile, readdir, readlink, rm, rmdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { BRIDGE, CGROUP_ROOT, CNI_NETWORK, NODE_DIR, NODE_IP, POD_SUBNET } from './network.js';

const run = promisify(execFile);

/** Sysctls the kubelet sets (seen on these machines), with no switch to stop it. */
const SYSCTLS = ['vm.overcommit_memory', 'kernel.panic', 'kernel.panic_on_oops', 'vm.panic_on_oom', 'kernel.keys.root_maxkeys', 'kernel.keys.root_maxbytes'];
/** Fixed host paths the kubelet, containerd or libcni create; removed at the end when they did not exist before. */
const HOST_DIRS = ['/run/containerd/s', '/run/containerd/runc/k8s.io', '/run/containerd/runc', '/run/containerd', '/var/lib/cni/results', '/var/lib/cni', '/var/log/containers', '/var/lib/kubelet/device-plugins', '/var/lib/kubelet'];
const CGROUP_BASE = '/sys/fs/cgroup';
const STATE = join(NODE_DIR, 'host.json');

export interface HostRecord {
  readonly sysctls: Record<string, string>;
  /** Of HOST_DIRS, those that existed before the node started. */
  readonly existed: readonly string[];
  /** Processes the tier started: pid and the start time /proc gives it (a reused pid is never killed). */
  readonly processes: { name: string; pid: number; startTime: string }[];
}

/**
 * Restores what a crashed run left (if its record is there), then records the
 * host as it is and prepares the bridge and the cgroups. Returns the record,
 * to which the node adds the processes it starts (`trackProcess`).
 */
export async function prepareHost(): Promise<HostRecord> {
  if (existsSync(STATE)) await restoreHost('a previous run did not finish');
  else if (existsSync(NODE_DIR)) await removeNodeDir();
  await mkdir(NODE_DIR, { recursive: true });
  const record: HostRecord = {
    sysctls: Object.fromEntries(await Promise.all(SYSCTLS.map(async (name) => [name, await readSysctl(name)] as const))),
    existed: HOST_DIRS.filter((path) => existsSync(path)),
    processes: [],
  };
  await writeFile(STATE, JSON.stringify(record, null, 2));
  await run('ip', ['link', 'add', BRIDGE, 'type', 'bridge']);
  await run('ip', ['addr', 'add', `${NODE_IP}/${POD_SUBNET.split('/')[1] ?? '24'}`, 'dev', BRIDGE]);
  await run('ip', ['link', 'set', BRIDGE, 'up']);
  for (const hierarchy of await cgroupHierarchies()) {
    const path = join(CGROUP_BASE, hierarchy, CGROUP_ROOT);
    await mkdir(path, { recursive: true });
    if (hierarchy === 'cpuset') {
      for (const file of ['cpuset.cpus', 'cpuset.mems']) await writeFile(join(path, file), await readFile(join(CGROUP_BASE, hierarchy, file), 'utf8'));
    }
  }
  return record;
}

/** Adds a started process to the record on disk, so a later run can stop it if this one dies. */
export async function trackProcess(record: HostRecord, name: string, pid: number): Promise<void> {
  record.processes.push({ name, pid, startTime: await startTime(pid) });
  await writeFile(STATE, JSON.stringify(record, null, 2));
}

/** Undoes everything the record lists; safe to run twice. WHY is logged when this cleans up after another run. */
export async function restoreHost(why?: string): Promise<string[]> {
  const done: string[] = [];
  const record = JSON.parse(await readFile(STATE, 'utf8')) as HostRecord;
  if (why !== undefined) process.stderr.write(`node tier: restoring the host (${why})\n`);
  for (const { name, pid, startTime: started } of [...record.processes].reverse()) {
    if ((await startTime(pid).catch(() => undefined)) !== started) continue;
    process.kill(pid, 'SIGKILL');
    done.push(`killed ${name} (${pid})`);
  }
  // The containers' processes and their shims: every process in the tier's cgroups, and shims serving its socket.
  for (const pid of [...(await cgroupProcesses()), ...(await shimProcesses())]) {
    try {
      process.kill(pid, 'SIGKILL');
      done.push(`killed ${pid}`);
    } catch {
      // already gone
    }
  }
  await sleep(200);
  await unmountUnder(NODE_DIR, done);
  await run('ip', ['link', 'del', BRIDGE]).then(() => done.push(`deleted ${BRIDGE}`), () => undefined);
  await removeCgroups(done);
  await removeMatching('/var/lib/cni/results', (name) => name.startsWith(`${CNI_NETWORK}-`), done);
  await removeMatching('/var/log/containers', async (name) => (await readlink(join('/var/log/containers', name)).catch(() => '')).startsWith(NODE_DIR), done);
  await rm('/var/lib/kubelet/device-plugins/kubelet.sock', { force: true });
  for (const path of HOST_DIRS) {
    if (record.existed.includes(path) || !existsSync(path)) continue;
    await rmdir(path).then(() => done.push(`removed ${path}`), () => undefined);
  }
  for (const [name, value] of Object.entries(record.sysctls)) {
    if ((await readSysctl(name)) !== value) {
      await writeFile(sysctlPath(name), value);
      done.push(`${name}=${value}`);
    }
  }
  await removeNodeDir();
  return done;
}

async function removeNodeDir(): Promise<void> {
  const left = await mountsUnder(NODE_DIR);
  if (left.length > 0) throw new Error(`node tier: ${left.length} mounts still under ${NODE_DIR} (${left[0]}); not removing it`);
  await rm(NODE_DIR, { recursive: true, force: true });
}

function sysctlPath(name: string): string {
  return join('/proc/sys', ...name.split('.'));
}

async function readSysctl(name: string): Promise<string> {
  return (await readFile(sysctlPath(name), 'utf8')).trim();
}

/** Field 22 of /proc/PID/stat: the process's start time in clock ticks since boot. */
export async function startTime(pid: number): Promise<string> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
}

async function cgroupHierarchies(): Promise<string[]> {
  const mounts = await readFile('/proc/self/mounts', 'utf8');
  return mounts.split('\n').map((line) => line.split(' ')).filter((fields) => fields[2] === 'cgroup' && fields[1]?.startsWith(`${CGROUP_BASE}/`)).map((fields) => (fields[1] ?? '').slice(CGROUP_BASE.length + 1));
}

/** Every cgroup directory under the tier's root in HIERARCHY, deepest first. */
async function cgroupTree(hierarchy: string): Promise<string[]> {
  const root = join(CGROUP_BASE, hierarchy, CGROUP_ROOT);
  if (!existsSync(root)) return [];
  const found: string[] = [];
  const walk = async (path: string): Promise<void> => {
    for (const entry of await readdir(path, { withFileTypes: true })) if (entry.isDirectory()) await walk(join(path, entry.name));
    found.push(path);
  };
  await walk(root);
  return found;
}

async function cgroupProcesses(): Promise<number[]> {
  const pids = new Set<number>();
  for (const hierarchy of await cgroupHierarchies()) {
    for (const path of await cgroupTree(hierarchy)) {
      for (const line of (await readFile(join(path, 'cgroup.procs'), 'utf8').catch(() => '')).split('\n')) if (line !== '') pids.add(Number(line));
    }
  }
  return [...pids];
}

async function shimProcesses(): Promise<number[]> {
  const pids: number[] = [];
  for (const entry of await readdir('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    const cmdline = await readFile(`/proc/${entry}/cmdline`, 'utf8').catch(() => '');
    if (cmdline.includes('containerd-shim') && cmdline.includes(NODE_DIR)) pids.push(Number(entry));
  }
  return pids;
}

async function removeCgroups(done: string[]): Promise<void> {
  for (const hierarchy of await cgroupHierarchies()) {
    for (const path of await cgroupTree(hierarchy)) {
      // A cgroup empties a moment after its last process was killed.
      for (let attempt = 0; attempt < 50; attempt += 1) {
        try {
          await rmdir(path);
          break;
        } catch (error) {
          if ((error as NodeJS.ErrnoException).code === 'ENOENT') break;
          if (attempt === 49) throw new Error(`node tier: cannot remove cgroup ${path}: ${(error as Error).message}`);
          await sleep(100);
        }
      }
    }
    done.push(`removed cgroup ${hierarchy}/${CGROUP_ROOT}`);
  }
}

async function mountsUnder(dir: string): Promise<string[]> {
  const info = await readFile('/proc/self/mountinfo', 'utf8');
  const points = info.split('\n').map((line) => (line.split(' ')[4] ?? '').replace(/\\040/g, ' ')).filter((point) => point === dir || point.startsWith(`${dir}/`));
  return points.sort((a, b) => b.length - a.length);
}

async function unmountUnder(dir: string, done: string[]): Promise<void> {
  for (let round = 0; round < 5; round += 1) {
    const points = await mountsUnder(dir);
    if (points.length === 0) return;
    for (const point of points) {
      await run('umount', [point]).catch(() => run('umount', ['-l', point])).then(() => done.push(`unmounted ${point}`), () => undefined);
    }
  }
}

async function removeMatching(dir: string, matches: (name: string) => boolean | Promise<boolean>, done: string[]): Promise<void> {
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    if (await matches(name)) {
      await rm(join(dir, name), { force: true });
      done.push(`removed ${join(dir, name)}`);
    }
  }
}
