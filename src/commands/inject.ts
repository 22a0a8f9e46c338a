import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { CaptureReason, formatManifests, processManifests } from '../injection/index.js';
import { captureLines, explainCapture } from './capture-text.js';
import { loadTemplates, readInput, type CommandIo } from './io.js';
import { parseAllowedOverrides } from './options.js';

export const INJECT_HELP = `Usage: envoy-injector inject -f FILE|- [options]

Injects the sidecar into every Pod and Pod template (Deployment, StatefulSet,
DaemonSet, ReplicaSet, Job, CronJob) of a multi-document YAML file and writes
the result to stdout. Other kinds pass through unchanged. Asking means
injecting: only Pods annotated envoy-injector.io/inject: "false", hostNetwork
Pods not annotated "true", and Pods already injected are left as they are.
Warnings, skipped Pods and, for templates that can capture traffic, each
Pod's capture decision and effective exclusions go to stderr.

Options:
  -f, --filename FILE     manifest to read ("-" for stdin)
      --template-file F   a ConfigMap manifest or a bare template (default: the bundled seed template)
      --template NAME     use this template of the file instead of "config"
      --native-sidecar    inject sidecars as native sidecars (initContainers, restartPolicy: Always)
      --allowed-overrides L  the proxy-* annotations Pods may use (default: the resource ones; "none")
  -h, --help              show this help
`;

export async function runInject(args: readonly string[], io: CommandIo): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      filename: { type: 'string', short: 'f' },
      'template-file': { type: 'string' },
      template: { type: 'string' },
      'native-sidecar': { type: 'boolean' },
      'allowed-overrides': { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    io.stdout.write(INJECT_HELP);
    return 0;
  }
  if (values.filename === undefined) throw new UsageError('inject: -f FILE is required ("-" reads stdin)');
  const templates = await loadTemplates(values['template-file'], io, values.template);
  const input = await readInput(values.filename, io);
  const { objects, reports } = processManifests(input, {
    templates,
    decision: {
      offline: true,
      nativeSidecar: values['native-sidecar'] ?? false,
      ...(values['allowed-overrides'] === undefined ? {} : { allowedOverrides: parseAllowedOverrides(values['allowed-overrides']) }),
    },
  });
  io.stdout.write(formatManifests(objects));
  for (const { kind, name, decision, warnings, capture, tcpProbes, proxyProtocol } of reports) {
    const what = `${kind}/${name || '(unnamed)'}`;
    for (const warning of warnings) io.stderr.write(`warning: ${what}: ${warning}\n`);
    if (!decision.inject) io.stderr.write(`${what}: not injected: ${decision.message}\n`);
    // Only for templates that can capture: the others have nothing to say.
    if (capture !== undefined && capture.reason !== CaptureReason.noCaptureSettings) {
      for (const line of captureLines(explainCapture(capture, tcpProbes, proxyProtocol))) io.stderr.write(`${what}: ${line}\n`);
    }
  }
  return 0;
}
