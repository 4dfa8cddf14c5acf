{{/* The release's resource name: the release name, with the chart's unless it holds it. */}}
{{- define "strand.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "strand.headless" -}}
{{- printf "%s-headless" (include "strand.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "strand.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "strand.labels" -}}
{{ include "strand.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* The Kafka listener's security protocol, from tls.enabled and sasl.enabled. */}}
{{- define "strand.protocol" -}}
{{- if and .Values.tls.enabled .Values.sasl.enabled -}}SASL_SSL
{{- else if .Values.tls.enabled -}}SSL
{{- else if .Values.sasl.enabled -}}SASL_PLAINTEXT
{{- else -}}PLAINTEXT
{{- end -}}
{{- end -}}

{{- define "strand.httpScheme" -}}
{{- if and .Values.tls.enabled .Values.tls.http -}}HTTPS{{- else -}}HTTP{{- end -}}
{{- end -}}
