/**
 * The seed's sidecar template (docs/design.md §5), the default of `npm start` and
 * `inject` when no template is given. Kept equal to
 * examples/envoy-initializer.yaml by a test. It is a teaching example: the
 * Helm chart ships a current Envoy instead.
 */
export const BUNDLED_TEMPLATE_DATA: Readonly<Record<string, string>> = {
  config: `containers:
  - name: envoy
    image: lyft/envoy:845747db88f102c0fd262ab234308e9e22f693a1
    command: ["/usr/local/bin/envoy"]
    args: ["--concurrency 4", "--config-path /etc/envoy/envoy.json", "--mode serve"]
    ports: [{containerPort: 80, protocol: TCP}]
    resources:
      limits: {cpu: "1000m", memory: "512Mi"}
      requests: {cpu: "100m", memory: "64Mi"}
    volumeMounts: [{name: envoy-conf, mountPath: /etc/envoy}]
volumes:
  - name: envoy-conf
    configMap: {name: envoy}
`,
};
