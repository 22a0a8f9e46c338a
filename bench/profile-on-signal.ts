/**
 * Preloaded by the bench into a server it profiles (`node --import
 * profile-on-signal.mjs ...`, `BENCH_CPU_PROFILE=<file>`): the first SIGUSR2
 * starts V8's sampling profiler (the inspector's Profiler domain, in
 * process), the second stops it, writes the profile (`.cpuprofile`, as
 * Chrome DevTools and `node --cpu-prof` write it) to that file and prints
 * one stderr line the bench waits for. So the profile holds the measured
 * load only: not the start, not the warm-up.
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

const file = process.env['BENCH_CPU_PROFILE'];
if (file === undefined) throw new Error('profile-on-signal needs BENCH_CPU_PROFILE');
/** Microseconds between samples (V8's default is 1000): finer, for sub-100 µs reviews. */
const intervalUs = Number(process.env['BENCH_CPU_PROFILE_INTERVAL_US'] ?? '100');
const session = new Session();
session.connect();
let running = false;

function failed(step: string, error: Error | null): boolean {
  if (error === null) return false;
  process.stderr.write(`bench-profile failed: ${step}: ${error.message}\n`);
  return true;
}

process.on('SIGUSR2', () => {
  if (!running) {
    running = true;
    session.post('Profiler.enable', (enableError) => {
      if (failed('enable', enableError)) return;
      session.post('Profiler.setSamplingInterval', { interval: intervalUs }, (intervalError) => {
        if (failed('interval', intervalError)) return;
        session.post('Profiler.start', (startError) => {
          if (!failed('start', startError)) process.stderr.write('bench-profile started\n');
        });
      });
    });
    return;
  }
  running = false;
  session.post('Profiler.stop', (error, result) => {
    if (failed('stop', error)) return;
    writeFileSync(file, JSON.stringify(result.profile));
    process.stderr.write(`bench-profile written ${file}\n`);
  });
});
