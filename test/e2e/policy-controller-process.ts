import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { ROOT } from '../helpers/fixtures.js';
import { trackChild } from './child-processes.js';
import type { Release } from './cluster.js';
import type { ControlPlane } from './control-plane.js';
import { deploymentEnv } from './injector-process.js';

/** `serve --mode policy` as a local process: the chart Deployment's environment, the chart's ServiceAccount, health on 127.0.0.1. */
export interface PolicyController {
  readonly child: ChildProcess;
  /** The plain-HTTP health port. */
  readonly port: number;
  /** Its log lines (stdout and stderr), as they come. */
  readonly logs: string[];
  /** SIGTERM, then SIGKILL after 15 s; resolves once it has exited. */
  stop(): Promise<void>;
}

export async function startPolicyController(plane: ControlPlane, release: Release): Promise<PolicyController> {
  const { env, serviceAccount } = await deploymentEnv(plane, release);
  const kubeconfig = await plane.serviceAccountKubeconfig(release.namespace, serviceAccount);
  const child = spawn(process.execPath, ['bin/envoy-injector.js', 'serve', '--kubeconfig', kubeconfig, '--host', '127.0.0.1', '--port', '0'], {
    cwd: ROOT,
    env: { ...process.env, ...env, KUBECONFIG: kubeconfig },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  trackChild(child);
  const { stdout, stderr } = child;
  assert.ok(stdout !== null && stderr !== null);
  const logs: string[] = [];
  createInterface({ input: stderr }).on('line', (line) => logs.push(line));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the policy controller did not start within 20 s:\n${logs.join('\n')}`)), 20_000);
    createInterface({ input: stdout }).on('line', (line) => {
      logs.push(line);
      const entry = JSON.parse(line) as { msg?: string; port?: number };
      if (typeof entry.port === 'number' && entry.msg?.startsWith('envoy-injector policy mode')) {
        clearTimeout(timer);
        resolve(entry.port);
      }
    });
    void exited.then(() => reject(new Error(`the policy controller exited:\n${logs.join('\n')}`)));
  });
  return {
    child,
    port,
    logs,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      if ((await Promise.race([exited.then(() => true), sleep(15_000, false)])) === false) child.kill('SIGKILL');
      await exited;
    },
  };
}

/** The status of GET /readyz on the controller's health port. */
export async function readyz(port: number): Promise<number> {
  const response = await fetch(`http://127.0.0.1:${port}/readyz`);
  return response.status;
}
