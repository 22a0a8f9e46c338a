import { parseArgs } from 'node:util';
import { UsageError } from '../errors.js';
import { formatManifests } from '../injection/index.js';
import { compilePolicy, DEFAULT_POLICY_NAME, policyObjects } from '../policy/compile-policy.js';
import { isPolicyApiVersion, POLICY_API_VERSIONS } from '../policy/policy-api-version.js';
import { loadTemplates, type CommandIo } from './io.js';
import { parseAllowedOverrides, parseSelectorsOption } from './options.js';

export const POLICY_HELP = `Usage: envoy-injector policy [options]

Prints the MutatingAdmissionPolicy and MutatingAdmissionPolicyBinding that
make the API server itself inject the sidecar as the webhook would, from the
same templates and settings. Kubernetes 1.36+ serves them as
admissionregistration.k8s.io/v1 with no flag; 1.34 and 1.35 serve only
v1beta1, with the API server flags --feature-gates=MutatingAdmissionPolicy=true
and --runtime-config=admissionregistration.k8s.io/v1beta1=true.
Review it, or apply it: envoy-injector policy ... | kubectl apply -f -

Options:
      --template-file F       a ConfigMap manifest or a bare template (default: the bundled seed template)
      --template NAME         the default template of the file instead of "config"
      --name NAME             name of the policy and binding (default "${DEFAULT_POLICY_NAME}")
      --namespace NAME        the injector's namespace: never injected
      --excluded-namespaces L comma-separated namespaces never injected (beyond kube-*)
      --native-sidecar MODE   on | off: native sidecars unless the template or Pod says otherwise (default off)
      --allowed-overrides L   the proxy-* annotations Pods may use (default: the resource ones; "none")
      --never-inject-selector JSON   Pod label selectors never injected unless annotated "true" (as serve's)
      --always-inject-selector JSON  Pod label selectors always injected unless annotated "false" (as serve's)
      --failure-policy P      Fail (default) | Ignore: when an expression fails
      --api-version V         v1 (default, Kubernetes 1.36+) | v1beta1 (1.34-1.35): the objects are the same otherwise
  -h, --help
`;

export async function runPolicy(args: readonly string[], io: CommandIo): Promise<number> {
  const { values } = parseArgs({
    args: [...args],
    options: {
      'template-file': { type: 'string' },
      template: { type: 'string' },
      name: { type: 'string', default: DEFAULT_POLICY_NAME },
      namespace: { type: 'string' },
      'excluded-namespaces': { type: 'string', default: '' },
      'native-sidecar': { type: 'string', default: 'off' },
      'allowed-overrides': { type: 'string' },
      'never-inject-selector': { type: 'string' },
      'always-inject-selector': { type: 'string' },
      'failure-policy': { type: 'string', default: 'Fail' },
      'api-version': { type: 'string', default: 'v1' },
      help: { type: 'boolean', short: 'h' },
    },
    strict: true,
  });
  if (values.help) {
    io.stdout.write(POLICY_HELP);
    return 0;
  }
  if (values['native-sidecar'] !== 'on' && values['native-sidecar'] !== 'off') throw new UsageError('--native-sidecar: must be on or off');
  const failurePolicy = values['failure-policy'];
  if (failurePolicy !== 'Fail' && failurePolicy !== 'Ignore') throw new UsageError('--failure-policy: must be Fail or Ignore');
  const apiVersion = values['api-version'];
  if (!isPolicyApiVersion(apiVersion)) throw new UsageError(`--api-version: must be ${POLICY_API_VERSIONS.join(' or ')}`);
  if (!DNS1123_SUBDOMAIN.test(values.name)) throw new UsageError(`--name: "${values.name}" must be a DNS-1123 subdomain (lowercase letters, digits, '-' and '.')`);
  const templates = await loadTemplates(values['template-file'], io, values.template);
  const compiled = compilePolicy(templates, {
    name: values.name,
    injectorNamespace: values.namespace,
    excludedNamespaces: values['excluded-namespaces'].split(',').map((name) => name.trim()).filter((name) => name !== ''),
    nativeSidecar: values['native-sidecar'] === 'on',
    failurePolicy,
    apiVersion,
    ...(values['allowed-overrides'] === undefined ? {} : { allowedOverrides: parseAllowedOverrides(values['allowed-overrides']) }),
    neverInjectSelectors: parseSelectorsOption('--never-inject-selector', values['never-inject-selector']),
    alwaysInjectSelectors: parseSelectorsOption('--always-inject-selector', values['always-inject-selector']),
  });
  io.stdout.write(formatManifests(policyObjects(compiled)));
  return 0;
}

const DNS1123_SUBDOMAIN = /^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
