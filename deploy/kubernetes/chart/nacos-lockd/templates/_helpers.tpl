{{/* The base name of every object: the release name, with the chart's name added unless it has it. */}}
{{- define "nacos-lockd.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 50 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 50 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "nacos-lockd.headless" -}}
{{- printf "%s-headless" (include "nacos-lockd.fullname" .) -}}
{{- end -}}

{{- define "nacos-lockd.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "nacos-lockd.labels" -}}
{{ include "nacos-lockd.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* A quorum of the members: what the PodDisruptionBudget keeps up. */}}
{{- define "nacos-lockd.quorum" -}}
{{- add (div (int .Values.replicaCount) 2) 1 -}}
{{- end -}}

{{/* http, or https when TLS covers the main port. */}}
{{- define "nacos-lockd.scheme" -}}
{{- if .Values.tls.enabled }}https{{ else }}http{{ end -}}
{{- end -}}

{{- define "nacos-lockd.validate" -}}
{{- if lt (int .Values.replicaCount) 1 }}{{ fail "replicaCount must be at least 1" }}{{ end -}}
{{- if or (lt (int .Values.mainPort) 1001) (gt (int .Values.mainPort) 64535) }}{{ fail "mainPort must be in 1001..64535 (mainPort-1000 and +1000 are used too)" }}{{ end -}}
{{- if and .Values.auth.enabled (not .Values.auth.existingSecret) }}{{ fail "auth.enabled needs auth.existingSecret" }}{{ end -}}
{{- if and .Values.tls.enabled (not .Values.tls.existingSecret) }}{{ fail "tls.enabled needs tls.existingSecret" }}{{ end -}}
{{- end -}}
