{{/*
The Service the ServiceMonitor scrapes: the chart's Service in webhook mode,
in policy mode `<fullname>-metrics` (metrics-service.yaml), since policy mode
has no Service of its own. The Prometheus Operator names the job after it.
*/}}
{{- define "envoy-injector.metricsServiceName" -}}
{{- if eq .Values.mode "policy" }}
{{- include "envoy-injector.suffixedName" (list . "metrics") }}
{{- else }}
{{- include "envoy-injector.serviceName" . }}
{{- end }}
{{- end }}

{{/*
The release as its injector names it on every metric series (METRICS_RELEASE:
the label envoy_injector_release), unique in the cluster.
*/}}
{{- define "envoy-injector.metricsRelease" -}}
{{ .Release.Namespace }}/{{ .Release.Name }}
{{- end }}

{{/*
The PromQL label matcher of this release's series: the label the injector
itself puts on them, so that a rule selects them whatever the scrape (the
ServiceMonitor's job and namespace, or the Pods' prometheus.io annotations
and the Prometheus' own job and target labels), and never another release's.
*/}}
{{- define "envoy-injector.metricsSelector" -}}
envoy_injector_release="{{ include "envoy-injector.metricsRelease" . }}"
{{- end }}

{{/*
The API server's names for this release's webhooks, as a PromQL regex (its
metrics label `name`): the names of mutatingwebhookconfiguration.yaml, each
release's own (envoy-injector.webhookNameSuffix).
*/}}
{{- define "envoy-injector.webhookNamesRegex" -}}
(enabled-namespaces|opted-in-pods|other-pods)\\.{{ include "envoy-injector.webhookNameSuffix" . | replace "." "\\\\." }}
{{- end }}

{{/*
The reasons of envoy_injector_admission_requests_total that mean a
misconfiguration (EnvoyInjectorPodsSkippedByMisconfiguration), as a PromQL
regex. Every other skip reason is expected; test/alerts.test.ts holds each
reason the injector can give to this list or to its list of reasons that
deliberately do not alert.
*/}}
{{- define "envoy-injector.misconfigurationReasons" -}}
unknown_template|unknown_namespace_template|status_copied|template_not_loaded|annotations_too_large|namespace_labels_unknown
{{- end }}

{{/*
An alert's runbook_url: metrics.prometheusRule.runbookBaseUrl (the runbook's
page, docs/runbook.md) plus the anchor of the alert's section.
include "envoy-injector.runbookUrl" (list . "EnvoyInjectorDown")
*/}}
{{- define "envoy-injector.runbookUrl" -}}
{{- $root := index . 0 }}
{{- printf "%s#%s" $root.Values.metrics.prometheusRule.runbookBaseUrl (index . 1 | lower) }}
{{- end }}
