import { logProcessWarnings } from '../server/process-warnings.js';
import { createLogger } from '../server/serve.js';
import type { CommandIo } from './io.js';
import { startPolicyController } from './policy-controller.js';
import { parseServeArgs, SERVE_HELP } from './serve-settings.js';
import { startInjector } from './start-injector.js';

// What `serve` is made of, for the CLI and the tests: the settings, and the injector they start.
export { parseDuration, parseServeArgs } from './serve-settings.js';
export { startInjector, type RunningInjector } from './start-injector.js';

/** `serve`: the webhook, or the policy controller (--mode policy), until SIGTERM or SIGINT. */
export async function runServe(args: readonly string[], io: CommandIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const settings = parseServeArgs(args, env);
  if (settings === undefined) {
    io.stdout.write(SERVE_HELP);
    return 0;
  }
  const log = createLogger(settings.logLevel);
  logProcessWarnings(log);
  const injector = settings.mode === 'policy' ? await startPolicyController(settings, { io, env, log }) : await startInjector(settings, { io, env, log });
  await new Promise<void>((resolve) => {
    let signals = 0;
    const onSignal = (signal: NodeJS.Signals): void => {
      signals += 1;
      if (signals > 1) {
        log.warn({ signal }, 'second signal: exiting now');
        process.exit(1);
      }
      log.info({ signal }, 'signal received');
      void injector.stop().then(resolve);
    };
    process.on('SIGTERM', onSignal);
    process.on('SIGINT', onSignal);
  });
  return 0;
}
