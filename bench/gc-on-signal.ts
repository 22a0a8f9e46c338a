/**
 * Preloaded by the bench into a server it measures at rest (`node
 * --expose-gc --import gc-on-signal.mjs ...`): on SIGUSR2, full GCs, then
 * `process.memoryUsage()` as one stderr line the bench waits for. Nothing
 * else changes in the server.
 */
process.on('SIGUSR2', () => {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (gc === undefined) throw new Error('gc-on-signal needs --expose-gc');
  gc();
  gc();
  process.stderr.write(`bench-gc ${JSON.stringify(process.memoryUsage())}\n`);
});
