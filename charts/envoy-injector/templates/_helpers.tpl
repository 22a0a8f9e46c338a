{{/*
Chart name, at most 63 characters: it is a label value and part of DNS names.
*/}}
{{- define "envoy-injector.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name of the release's objects, at most 63 characters (the
Service name is a DNS-1035 label). A release name that already contains the
chart name is used alone.
*/}}
{{- define "envoy-injector.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
The fullname plus a suffix, the whole still at most 63 characters:
include "envoy-injector.suffixedName" (list . "tls")
*/}}
{{- define "envoy-injector.suffixedName" -}}
{{- $root := index . 0 }}
{{- $suffix := index . 1 }}
{{- $base := include "envoy-injector.fullname" $root | trunc (int (sub 62 (len $suffix))) | trimSuffix "-" }}
{{- printf "%s-%s" $base $suffix }}
{{- end }}

{{/*
chart label value: name-version, at most 63 characters.
*/}}
{{- define "envoy-injector.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Labels of every object of the release.
*/}}
{{- define "envoy-injector.labels" -}}
helm.sh/chart: {{ include "envoy-injector.chart" . }}
{{ include "envoy-injector.selectorLabels" . }}
app.kubernetes.io/version: {{ (default .Chart.AppVersion .Values.image.tag) | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: envoy-injector
{{- end }}

{{/*
Labels that select the injector's Pods (Deployment, PDB, Service, spread).
*/}}
{{- define "envoy-injector.selectorLabels" -}}
app.kubernetes.io/name: {{ include "envoy-injector.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/component: webhook
{{- end }}

{{/*
The label every injector Pod carries and that the webhooks' objectSelector
excludes (DoesNotExist), so no injector, of this release or another, is ever
sent to a webhook: the webhook can never block its own restart.
*/}}
{{- define "envoy-injector.podMarkerKey" -}}
envoy-injector.io/injector
{{- end }}

{{- define "envoy-injector.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "envoy-injector.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "envoy-injector.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The TLS Secret: made by the injector (auto), by cert-manager (certManager) or
given (secret).
*/}}
{{- define "envoy-injector.tlsSecretName" -}}
{{- if .Values.certificates.secretName }}
{{- .Values.certificates.secretName }}
{{- else if eq .Values.certificates.mode "secret" }}
{{- fail "certificates.secretName is required when certificates.mode is secret (an existing kubernetes.io/tls Secret in the release namespace)" }}
{{- else }}
{{- include "envoy-injector.suffixedName" (list . "tls") }}
{{- end }}
{{- end }}

{{/*
Name of a cluster-scoped object (ClusterRole, ClusterRoleBinding, webhook
configuration, admission policy): the fullname plus the release namespace,
so that releases of the same name in two namespaces never collide. Past 63
characters, truncated and suffixed with a hash of the whole, so that it
stays unique.

Releases installed before this naming have them as `<fullname>`: while the
ClusterRole of that name exists and is this release's (Helm's ownership
annotations), every one keeps that name, so `helm upgrade` does not replace
the webhook configuration with one that has no caBundle yet. (lookup sees
nothing under `helm template` and --dry-run=client: the new names.)
*/}}
{{- define "envoy-injector.clusterScopedName" -}}
{{- $fullname := include "envoy-injector.fullname" . }}
{{- $legacy := lookup "rbac.authorization.k8s.io/v1" "ClusterRole" "" $fullname }}
{{- $owner := dig "metadata" "annotations" dict $legacy }}
{{- $name := printf "%s-%s" $fullname .Release.Namespace }}
{{- if and (eq (index $owner "meta.helm.sh/release-name" | default "") .Release.Name) (eq (index $owner "meta.helm.sh/release-namespace" | default "") .Release.Namespace) }}
{{- $fullname }}
{{- else if gt (len $name) 63 }}
{{- printf "%s-%s" ($name | trunc 54 | trimSuffix "-") ($name | sha256sum | trunc 8) }}
{{- else }}
{{- $name }}
{{- end }}
{{- end }}

{{/*
Names of the MutatingWebhookConfiguration and the Service.
*/}}
{{- define "envoy-injector.webhookConfigName" -}}
{{- include "envoy-injector.clusterScopedName" . }}
{{- end }}

{{/*
What follows the purpose in each webhook's name (`<purpose>.<suffix>`):
`<webhook configuration name>.envoy-injector.io`, that name being unique in
the cluster, so the API server's metrics (label `name`) tell every release's
webhooks apart and each release's alerts match its own. A configuration in
the cluster that already holds the former names (`<purpose>.envoy-injector.io`,
before each release had its own) keeps them: in auto mode the injector
co-owns every webhook's caBundle, and Helm 4's server-side apply refuses an
upgrade that drops such an entry. (lookup sees nothing under `helm template`
and --dry-run=client: the new names.)
*/}}
{{- define "envoy-injector.webhookNameSuffix" -}}
{{- $config := include "envoy-injector.webhookConfigName" . }}
{{- $former := false }}
{{- range (dig "webhooks" list (lookup "admissionregistration.k8s.io/v1" "MutatingWebhookConfiguration" "" $config)) }}
{{- if eq (dig "name" "" .) "enabled-namespaces.envoy-injector.io" }}{{ $former = true }}{{ end }}
{{- end }}
{{- if $former }}envoy-injector.io{{ else }}{{ $config }}.envoy-injector.io{{ end }}
{{- end }}

{{- define "envoy-injector.serviceName" -}}
{{- include "envoy-injector.fullname" . }}
{{- end }}

{{/*
Policy mode: the MutatingAdmissionPolicy and its binding share this name.
*/}}
{{/*
The rollout's Lease (rollout.enabled), in the release namespace: one leader among the replicas.
*/}}
{{- define "envoy-injector.rolloutLease" -}}
{{- printf "%s-rollout" (include "envoy-injector.fullname" .) }}
{{- end }}

{{- define "envoy-injector.policyName" -}}
{{- include "envoy-injector.clusterScopedName" . }}
{{- end }}

{{/*
Namespaces no webhook ever sees, as a YAML flow list: the control plane's, the
release's own and the configured ones, without duplicates.
*/}}
{{- define "envoy-injector.excludedNamespaces" -}}
{{- $all := concat (list "kube-system" "kube-public" "kube-node-lease" .Release.Namespace) .Values.excludedNamespaces | uniq }}
{{- toJson $all }}
{{- end }}

{{/*
Where the TLS Secret is mounted in files mode (certManager, secret).
*/}}
{{- define "envoy-injector.tlsMountPath" -}}
/etc/envoy-injector/tls
{{- end }}

{{/*
The chart's default sidecar template: a pinned Envoy whose bootstrap is given
inline, so it needs no object in the injected namespace. Admin listens on
127.0.0.1 only; a one-route listener on healthPort forwards GET /ready to it
for the kubelet's readiness and startup probes and answers 404 to anything
else. proxyLifecycle tells the injector how to hold the app until Envoy is
ready and how to drain it (docs/lifecycle.md).
*/}}
{{- define "envoy-injector.defaultTemplate" -}}
{{- $p := .Values.proxy -}}
containers:
  - name: envoy
    image: {{ printf "%s:%s" $p.image.repository $p.image.tag | quote }}
    imagePullPolicy: {{ $p.image.pullPolicy }}
    command: ["/usr/local/bin/envoy"]
    args:
      - --config-yaml
      - |
{{ include "envoy-injector.envoyBootstrap" . | indent 8 }}
      - --disable-hot-restart
      - --concurrency
      - {{ $p.concurrency | quote }}
      - --log-level
      - {{ $p.logLevel | quote }}
      {{- /* A drain (preStop, classic sidecars) discourages every new request at once, for the time the hook waits. */}}
      - --drain-time-s
      - {{ $p.drainSeconds | quote }}
      - --drain-strategy
      - immediate
    ports:
      - name: envoy-health
        containerPort: {{ $p.healthPort }}
        protocol: TCP
    readinessProbe:
      httpGet:
        path: /ready
        port: {{ $p.healthPort }}
      periodSeconds: 5
      failureThreshold: 3
    resources:
{{ toYaml $p.resources | indent 6 }}
    securityContext:
      runAsNonRoot: true
{{- if not (kindIs "invalid" $p.runAsUser) }}
      runAsUser: {{ $p.runAsUser }}
      runAsGroup: {{ $p.runAsUser }}
{{- end }}
      allowPrivilegeEscalation: false
      readOnlyRootFilesystem: true
      capabilities:
        drop: ["ALL"]
      seccompProfile:
        type: RuntimeDefault
{{- /* The injector adds the startupProbe (native) or the hooks (classic) from this. */}}
proxyLifecycle:
  holdApplication: {{ $p.holdApplication }}
  adminPort: {{ $p.adminPort }}
  readyPort: {{ $p.healthPort }}
  readyPath: /ready
  drainSeconds: {{ $p.drainSeconds }}
  startupSeconds: {{ $p.startupSeconds }}
safeToEvictLocalVolumes: {{ $p.safeToEvictLocalVolumes }}
{{- if not (kindIs "invalid" $p.runAsUser) }}
{{- /* The rules let the proxy's user through: without a known uid the template cannot capture. */}}
capture:
  image: {{ include "envoy-injector.captureImage" . | quote }}
{{- if ne $p.capture.mode "initContainer" }}
  mode: {{ $p.capture.mode }}
  {{- /* CNI mode's check runs the injector's own check-capture. */}}
  checkImage: {{ include "envoy-injector.image" . | quote }}
{{- end }}
  imagePullPolicy: {{ $p.capture.image.pullPolicy }}
  outboundPort: {{ $p.capture.outboundPort }}
  inboundPort: {{ $p.capture.inboundPort }}
  proxyPorts: [{{ $p.adminPort }}, {{ $p.healthPort }}{{ if $p.capture.tcpProbePort }}, {{ $p.capture.tcpProbePort }}{{ end }}]
  enabled: {{ $p.capture.enabled }}
  excludeOutboundCidrs: {{ join "," $p.capture.excludeOutboundCidrs | quote }}
  excludeOutboundPorts: {{ join "," $p.capture.excludeOutboundPorts | quote }}
  excludeInboundPorts: {{ join "," $p.capture.excludeInboundPorts | quote }}
  includeInboundPorts: {{ join "," $p.capture.includeInboundPorts | quote }}
{{- if $p.capture.tcpProbePort }}
  {{- /* The injector rewrites a captured Pod's tcpSocket probes to this port and gives Envoy the listener (--config-path). */}}
  tcpProbes: {port: {{ $p.capture.tcpProbePort }}, address: {{ $p.listenAddress | quote }}}
{{- end }}
  {{- /* The bootstrap's inbound listener hands connections off by original destination: a Pod's PROXY protocol listeners (--config-path) take them. */}}
  inboundHandoff: true
{{- if $p.capture.tproxyPort }}
  {{- /* TPROXY's transparent listener: in the Pod's own bootstrap (--config-path), since only a TPROXY Pod's Envoy has NET_ADMIN. */}}
  tproxyPort: {{ $p.capture.tproxyPort }}
{{- end }}
{{- if ne $p.capture.interception "redirect" }}
{{- if or (eq $p.capture.mode "cni") (not $p.capture.tproxyPort) }}
{{- fail "proxy.capture.interception: tproxy needs proxy.capture.tproxyPort (its transparent listener) and cannot be proxy.capture.mode cni's (the node plugin installs the REDIRECT rules only)" }}
{{- end }}
{{- if eq $.Values.mode "policy" }}
{{- fail "proxy.capture.interception: tproxy is the webhook's only: mode policy captures by REDIRECT (the transparent listener is in the per-Pod bootstrap, which the policy does not build); use mode webhook, or interception redirect" }}
{{- end }}
  interception: {{ $p.capture.interception }}
{{- end }}
{{- if $p.capture.allowTproxy }}
{{- if or (eq $p.capture.mode "cni") (not $p.capture.tproxyPort) }}
{{- fail "proxy.capture.allowTproxy: TPROXY needs proxy.capture.tproxyPort (its transparent listener) and cannot be proxy.capture.mode cni's (the node plugin installs the REDIRECT rules only)" }}
{{- end }}
{{- if eq $.Values.mode "policy" }}
{{- fail "proxy.capture.allowTproxy: TPROXY is the webhook's only: mode policy captures by REDIRECT (the transparent listener is in the per-Pod bootstrap, which the policy does not build); use mode webhook, or leave it false" }}
{{- end }}
  {{- /* Every Pod may ask for TPROXY (envoy-injector.io/capture-interception); without it only where the namespace is labelled envoy-injector.io/allow-tproxy: "true". */}}
  allowTproxy: true
{{- end }}
  resources:
{{ toYaml $p.capture.resources | indent 4 }}
{{- end }}
{{- end }}

{{- define "envoy-injector.captureImage" -}}
{{- $image := .Values.proxy.capture.image -}}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/*
Envoy's bootstrap. With traffic capture possible (a known runAsUser), two more
listeners take what the envoy-init rules redirect, on the very ports the
template's capture section gives the rules: outbound (the original_dst
listener filter) and inbound (use_original_dst: it hands a connection off to
the listener of its original destination when the Pod's own bootstrap has
one, the PROXY protocol's; the outbound listener must not, or the app's own
connections to such a port elsewhere would be handed off too), each a TCP proxy to an
ORIGINAL_DST cluster, so a connection goes on to where it was headed. A
connection addressed to a listener's own port would come back to it forever:
it goes to a cluster without endpoints instead.
*/}}
{{- define "envoy-injector.envoyBootstrap" -}}
{{- $p := .Values.proxy -}}
admin:
  address:
    socket_address: {address: 127.0.0.1, port_value: {{ $p.adminPort }}}
static_resources:
  listeners:
    - name: health
      address:
        {{- /* "::" with ipv4_compat: one socket answers probes of an IPv4 or an IPv6 Pod address. */}}
        socket_address: {address: {{ $p.listenAddress | quote }}, port_value: {{ $p.healthPort }}{{ if eq $p.listenAddress "::" }}, ipv4_compat: true{{ end }}}
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: health
                route_config:
                  virtual_hosts:
                    - name: health
                      domains: ["*"]
                      routes:
                        - match: {path: /ready, headers: [{name: ":method", string_match: {exact: GET}}]}
                          route: {cluster: admin}
                        - match: {prefix: /}
                          direct_response: {status: 404}
                http_filters:
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
{{- if not (kindIs "invalid" $p.runAsUser) }}
{{- range $direction := list "outbound" "inbound" }}
{{- $port := ternary $p.capture.outboundPort $p.capture.inboundPort (eq $direction "outbound") }}
    - name: {{ $direction }}
      {{- /* One socket per family, not "::" with ipv4_compat: SO_ORIGINAL_DST is asked of the redirected connection's own family. */}}
      address:
        socket_address: {address: 0.0.0.0, port_value: {{ $port }}}
      {{- if eq $p.listenAddress "::" }}
      additional_addresses:
        - address:
            socket_address: {address: "::", port_value: {{ $port }}}
      {{- end }}
      traffic_direction: {{ upper $direction }}
      {{- if eq $direction "inbound" }}
      use_original_dst: true
      {{- else }}
      listener_filters:
        - name: envoy.filters.listener.original_dst
          typed_config:
            "@type": type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst
      {{- end }}
      filter_chains:
        - filter_chain_match: {destination_port: {{ $port }}}
          filters:
            - name: envoy.filters.network.tcp_proxy
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
                stat_prefix: {{ $direction }}_loop
                cluster: blackhole
        - filters:
            - name: envoy.filters.network.tcp_proxy
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy
                stat_prefix: {{ $direction }}
                cluster: {{ $direction }}_passthrough
{{- end }}
{{- end }}
  clusters:
    - name: admin
      type: STATIC
      connect_timeout: 1s
      load_assignment:
        cluster_name: admin
        endpoints:
          - lb_endpoints:
              - endpoint:
                  address:
                    socket_address: {address: 127.0.0.1, port_value: {{ $p.adminPort }}}
{{- if not (kindIs "invalid" $p.runAsUser) }}
    - name: outbound_passthrough
      type: ORIGINAL_DST
      lb_policy: CLUSTER_PROVIDED
      connect_timeout: 10s
    - name: inbound_passthrough
      type: ORIGINAL_DST
      lb_policy: CLUSTER_PROVIDED
      connect_timeout: 10s
    - name: blackhole
      type: STATIC
      connect_timeout: 1s
{{- end }}
{{- end }}

{{/*
A template value as ConfigMap text: YAML text as given, a mapping as YAML.
*/}}
{{- define "envoy-injector.templateText" -}}
{{- if kindIs "string" . }}
{{- . }}
{{- else }}
{{- toYaml . }}
{{- end }}
{{- end }}

{{/*
Pod label selectors (a list of {matchLabels, matchExpressions}) as one CEL
boolean over the Pod's labels: true when any selector matches, with the
standard semantics (the injector's selectorMatches, policy mode's selectorCel).
Keys and values are label keys and values (values.schema.json), so single
quotes never occur in them.
*/}}
{{- define "envoy-injector.selectorsCel" -}}
{{- $labels := "(has(object.metadata.labels) ? object.metadata.labels : {})" -}}
{{- $selectors := list -}}
{{- range $selector := . -}}
{{- $parts := list -}}
{{- range $key, $value := ($selector.matchLabels | default dict) -}}
{{- $parts = append $parts (printf "('%s' in %s && %s['%s'] == '%s')" $key $labels $labels $key $value) -}}
{{- end -}}
{{- range $requirement := ($selector.matchExpressions | default list) -}}
{{- $key := $requirement.key -}}
{{- $values := list -}}
{{- range ($requirement.values | default list) }}{{ $values = append $values (printf "'%s'" .) }}{{ end -}}
{{- $in := printf "%s['%s'] in [%s]" $labels $key (join ", " $values) -}}
{{- if eq $requirement.operator "In" -}}
{{- $parts = append $parts (printf "('%s' in %s && %s)" $key $labels $in) -}}
{{- else if eq $requirement.operator "NotIn" -}}
{{- $parts = append $parts (printf "(!('%s' in %s) || !(%s))" $key $labels $in) -}}
{{- else if eq $requirement.operator "Exists" -}}
{{- $parts = append $parts (printf "('%s' in %s)" $key $labels) -}}
{{- else -}}
{{- $parts = append $parts (printf "!('%s' in %s)" $key $labels) -}}
{{- end -}}
{{- end -}}
{{- $selectors = append $selectors (printf "(%s)" (join " && " $parts)) -}}
{{- end -}}
{{- join " || " $selectors -}}
{{- end -}}

{{/*
Capture in CNI mode's node agent (cni-agent-*.yaml): made when
proxy.capture.mode is cni or auto. Its own component label, so that neither
the webhook's Service nor its PodDisruptionBudget selects the agent's Pods.
*/}}
{{- define "envoy-injector.cniAgentEnabled" -}}
{{- if has .Values.proxy.capture.mode (list "cni" "auto") }}true{{ end }}
{{- end }}

{{- /*
"true" when the CNI agent's node policy is rendered (cni-agent-node-policy.yaml):
the agent is, and the cluster serves ValidatingAdmissionPolicy v1. The
cluster's discovery lists kinds (apps/v1/Deployment); helm template without a
cluster lists none: then --kube-version decides (v1 is GA from 1.30).
*/}}
{{- define "envoy-injector.cniAgentNodePolicy" -}}
{{- if include "envoy-injector.cniAgentEnabled" . }}
{{- $caps := .Capabilities.APIVersions }}
{{- if $caps.Has "apps/v1/Deployment" }}
{{- if $caps.Has "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy" }}true{{ end }}
{{- else if semverCompare ">=1.30.0-0" .Capabilities.KubeVersion.Version }}true{{ end }}
{{- end }}
{{- end }}

{{- define "envoy-injector.cniAgentName" -}}
{{- include "envoy-injector.suffixedName" (list . "cni-agent") }}
{{- end }}

{{- define "envoy-injector.cniAgentSelectorLabels" -}}
app.kubernetes.io/name: {{ include "envoy-injector.name" . }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/component: cni-agent
{{- end }}

{{- define "envoy-injector.cniAgentLabels" -}}
helm.sh/chart: {{ include "envoy-injector.chart" . }}
{{ include "envoy-injector.cniAgentSelectorLabels" . }}
app.kubernetes.io/version: {{ (default .Chart.AppVersion .Values.cniAgent.image.tag) | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: envoy-injector
{{- end }}

{{- define "envoy-injector.cniAgentImage" -}}
{{- $image := .Values.cniAgent.image -}}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository (default .Chart.AppVersion $image.tag) }}
{{- end }}
{{- end }}

{{/*
The injector's securityContext (CONTEXT) for the platform: on OpenShift
(platform: openshift) without runAsUser, runAsGroup and fsGroup, which its
restricted-v2 SCC assigns from the namespace's range and refuses when fixed
outside it (docs/install.md, "OpenShift").
*/}}
{{- define "envoy-injector.platformSecurityContext" -}}
{{- if eq .root.Values.platform "openshift" }}
{{- toYaml (omit .context "runAsUser" "runAsGroup" "fsGroup") }}
{{- else }}
{{- toYaml .context }}
{{- end }}
{{- end }}
