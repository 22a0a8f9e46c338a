import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { ROOT } from './fixtures.js';

export interface ServerProcess {
  readonly child: ChildProcess;
  readonly port: number;
  /** Every JSON log line so far. */
  readonly logs: Record<string, unknown>[];
  readonly stderr: string[];
  /** Resolves with the exit code. */
  readonly exited: Promise<number | null>;
}

/**
 * Runs `node NODE_FLAGS bin/envoy-injector.js serve ARGS` (the compiled build) and waits until it listens.
 * Node flags go on the command line, as the image's ENTRYPOINT has them: NODE_OPTIONS refuses some V8 flags.
 */
export async function spawnServer(args: readonly string[], env: NodeJS.ProcessEnv = {}, nodeFlags: readonly string[] = []): Promise<ServerProcess> {
  const child = spawn(process.execPath, [...nodeFlags, 'bin/envoy-injector.js', 'serve', '--host', '127.0.0.1', '--port', '0', ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Record<string, unknown>[] = [];
  const stderr: string[] = [];
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  createInterface({ input: child.stderr! }).on('line', (line) => stderr.push(line));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start within 30 s: ${stderr.join('\n')}`)), 30_000);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      let entry: Record<string, unknown>;
      try {
        entry = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      logs.push(entry);
      if (typeof entry['port'] === 'number' && String(entry['msg']).startsWith('envoy-injector serving https')) {
        clearTimeout(timer);
        resolve(entry['port']);
      }
    });
    void exited.then((code) => reject(new Error(`server exited with ${code}: ${stderr.join('\n')}`)));
  });
  return { child, port, logs, stderr, exited };
}
