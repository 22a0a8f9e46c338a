import type { JsonObject } from '../../src/injection/index.js';

/**
 * A large but real-shaped Pod: `containers` containers sharing `envVars`
 * variables, `volumes` volumes, grown to about `targetBytes` of JSON with env
 * values (the shape of config-heavy Pods with thousands of env vars).
 */
export function largePod({ containers = 40, envVars = 2000, volumes = 200, targetBytes = 1024 * 1024 } = {}): JsonObject {
  const skeleton = build(containers, envVars, volumes, 0);
  const perVar = Math.max(0, Math.floor((targetBytes - JSON.stringify(skeleton).length) / envVars));
  return build(containers, envVars, volumes, perVar);
}

function build(containerCount: number, envVars: number, volumeCount: number, valueLength: number): JsonObject {
  const perContainer = Math.ceil(envVars / containerCount);
  const volumes = Array.from({ length: volumeCount }, (_, i) => ({ name: `vol-${i}`, configMap: { name: `config-${i}` } }));
  const containers = Array.from({ length: containerCount }, (_, c) => ({
    name: `app-${c}`,
    image: `registry.example.com/team/app-${c}:1.0.${c}`,
    ports: [{ containerPort: 8000 + c, protocol: 'TCP' }],
    env: Array.from({ length: Math.min(perContainer, envVars - c * perContainer) }, (_, e) => ({
      name: `SETTING_${c}_${e}`,
      value: 'v'.repeat(valueLength),
    })),
    resources: { requests: { cpu: '10m', memory: '16Mi' }, limits: { cpu: '100m', memory: '64Mi' } },
    volumeMounts: volumes.slice(c * 5, c * 5 + 5).map((v) => ({ name: v.name, mountPath: `/etc/${v.name}` })),
  }));
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { generateName: 'big-', namespace: 'load', labels: { app: 'big' }, annotations: { 'team.example.com/owner': 'load' } },
    spec: { containers, volumes },
  };
}
