import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { describe, it } from 'node:test';
import { addCpu, CPU_PROCESSES, cpuPerPod, cpuRows, readCpu, zeroCpu } from '../bench/cluster-cpu.js';

describe('bench: CPU per Pod per process (the apiserver part)', () => {
  it('reads the CPU a child process spent, and 0 for a process that is gone', async () => {
    // Busy for 200 ms of CPU (process.cpuUsage), then waits to be read.
    const child = spawn(process.execPath, ['-e', 'while ((process.cpuUsage().user + process.cpuUsage().system) < 200000); console.log("done"); setInterval(() => {}, 1000)'], { stdio: ['ignore', 'pipe', 'inherit'] });
    try {
      await once(child.stdout, 'data');
      const read = readCpu({ injector: child.pid, etcd: 2 ** 22 + 12345, 'kube-apiserver': undefined });
      // /proc counts user and system time in 10 ms ticks, each rounded down: up to 20 ms under the child's own 200 ms.
      assert.ok(read.injector >= 0.18, `the child's CPU: ${read.injector} s`);
      assert.equal(read.etcd, 0);
      assert.equal(read['kube-apiserver'], 0);
      assert.ok(read['load clients'] > 0, 'this process is the load clients');
    } finally {
      child.kill('SIGKILL');
    }
  });

  it('sums deltas over rounds and divides by the Pods created', () => {
    const total = zeroCpu();
    const before = { ...zeroCpu(), 'kube-apiserver': 10, etcd: 1 };
    addCpu(total, before, { ...before, 'kube-apiserver': 10.5, etcd: 1.1 });
    addCpu(total, { ...before, 'kube-apiserver': 20 }, { ...before, 'kube-apiserver': 20.3, injector: 0.2 });
    // A process restarted between two reads (its counter went down) adds nothing.
    addCpu(total, { ...zeroCpu(), 'floor webhook': 5 }, { ...zeroCpu(), 'floor webhook': 1 });
    const perPod = cpuPerPod(total, 100);
    assert.ok(Math.abs(perPod.msPerPod['kube-apiserver'] - 8) < 1e-9);
    assert.ok(Math.abs(perPod.msPerPod.etcd - 1) < 1e-9);
    assert.ok(Math.abs(perPod.msPerPod.injector - 2) < 1e-9);
    assert.equal(perPod.msPerPod['floor webhook'], 0);
    assert.ok(Math.abs(perPod.totalMsPerPod - 11) < 1e-9);
  });

  it('prints a row per path with a column per process and the total', () => {
    const cpu = cpuPerPod({ ...zeroCpu(), 'kube-apiserver': 0.25, 'load clients': 0.05 }, 50);
    const rows = cpuRows([{ description: 'no injection', cpu }, { description: 'not measured', cpu: undefined }]);
    assert.deepEqual(rows[0], ['CPU ms per Pod', ...CPU_PROCESSES, 'total']);
    assert.equal(rows.length, 2);
    assert.deepEqual(rows[1], ['no injection', '5.00', '0.00', '0.00', '0.00', '0.00', '0.00', '1.00', '6.00']);
  });
});
