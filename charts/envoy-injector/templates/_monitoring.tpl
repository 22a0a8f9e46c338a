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
The PromQL label matchers of this release's scraped series: the job the
ServiceMonitor makes and the release namespace.
*/}}
{{- define "envoy-injector.metricsSelector" -}}
job="{{ include "envoy-injector.metricsServiceName" . }}", namespace="{{ .Release.Namespace }}"
{{- end }}

{{/*
The API server's name for our webhooks, as a PromQL regex (its metrics label
`name`); webhook names are the same in every release.
*/}}
{{- define "envoy-injector.webhookNamesRegex" -}}
(enabled-namespaces|opted-in-pods|other-pods)\\.envoy-injector\\.io
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
