import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { BUNDLED_TEMPLATE_DATA, parseTemplateData, parseYaml, type JsonObject, type TemplateSet } from '../../src/injection/index.js';

export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function repoFile(path: string): string {
  return readFileSync(new URL(path, new URL('../../', import.meta.url)), 'utf8');
}

export function seedTemplates(): TemplateSet {
  return parseTemplateData(BUNDLED_TEMPLATE_DATA);
}

export function seedPod(): JsonObject {
  return parseYaml(repoFile('examples/myapp-pod.yaml')) as JsonObject;
}

/** A Pod as a controller creates it: generateName only, no namespace. */
export function controllerPod(extra: Partial<JsonObject> = {}): JsonObject {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'web-7d4b9c-', labels: { app: 'web' } },
    spec: { containers: [{ name: 'web', image: 'nginx:1.27' }] },
    ...extra,
  } as JsonObject;
}

/**
 * The rule script's arguments of test/golden/capture-templates.yaml's
 * `cni` template for a Pod that adds no exclusions: what its check
 * container carries and what the node's plugin runs the script with.
 */
export const CNI_TEMPLATE_RULE_ARGS: readonly string[] = [
  '--proxy-uid=1337',
  '--outbound-port=15001',
  '--inbound-port=15006',
  '--proxy-ports=9901,9902',
  '--exclude-outbound-cidrs=169.254.169.254/32',
  '--exclude-outbound-ports=',
  '--exclude-inbound-ports=',
  '--include-inbound-ports=',
];
