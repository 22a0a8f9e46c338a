import { reportError, type CommandIo } from './commands/io.js';

const HELP = `Usage: envoy-injector <command> [options]

Commands:
  serve      run the admission webhook (HTTPS)
  inject     inject the sidecar into manifests offline
  explain    show, rule by rule, what the webhook would decide and change for manifests
  status     which workloads run Pods injected with an outdated template; --restart rolls them
  policy     print the MutatingAdmissionPolicy that injects without the webhook (Kubernetes 1.34+)
  certs      make a development CA and serving certificate
  check-capture  CNI mode's init container: whether the node installed the capture rules
  cni-agent  CNI mode's node agent: installs the CNI plugin, answers it, repairs Pods

Run "envoy-injector <command> --help" for a command's options.
`;

type Command = (args: readonly string[], io: CommandIo, env: NodeJS.ProcessEnv) => Promise<number>;

/**
 * Each command's module is loaded when it runs, so that a process holds only
 * the code of its own command: `serve` never loads the offline CLI's
 * renderers or the policy compiler (RSS at rest, issue 39), and the agent's
 * Kubernetes client is not loaded for every other command.
 */
const COMMANDS: Readonly<Record<string, Command>> = {
  serve: async (args, io, env) => (await import('./commands/serve.js')).runServe(args, io, env),
  inject: async (args, io) => (await import('./commands/inject.js')).runInject(args, io),
  explain: async (args, io) => (await import('./commands/explain.js')).runExplain(args, io),
  status: async (args, io, env) => (await import('./commands/status.js')).runStatus(args, io, env),
  policy: async (args, io) => (await import('./commands/policy.js')).runPolicy(args, io),
  certs: async (args, io) => (await import('./commands/certs.js')).runCerts(args, io),
  'check-capture': async (args, io) => (await import('./commands/check-capture.js')).runCheckCapture(args, io),
  'cni-agent': async (args, io, env) => (await import('./commands/cni-agent.js')).runCniAgent(args, io, env),
};

/** Runs one command; resolves to the process exit code. */
export async function runCli(argv: readonly string[], io: CommandIo, env: NodeJS.ProcessEnv = process.env): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || name === '--help' || name === '-h' || name === 'help') {
    io.stdout.write(HELP);
    return name === undefined ? 2 : 0;
  }
  const command = Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined;
  if (command === undefined) {
    io.stderr.write(`envoy-injector: unknown command "${name}"\n${HELP}`);
    return 2;
  }
  try {
    return await command(args, io, env);
  } catch (error) {
    if (error instanceof TypeError && 'code' in error && String(error.code).startsWith('ERR_PARSE_ARGS')) {
      io.stderr.write(`envoy-injector ${name}: ${error.message}\n`);
      return 2;
    }
    return reportError(error, io);
  }
}
