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
