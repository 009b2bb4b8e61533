{{/* Chart name, truncated to a DNS label. */}}
{{- define "echo-memory.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Release-scoped base name for every object. */}}
{{- define "echo-memory.fullname" -}}
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

{{- define "echo-memory.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels on every object. */}}
{{- define "echo-memory.labels" -}}
helm.sh/chart: {{ include "echo-memory.chart" . }}
{{ include "echo-memory.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: echo-memory
{{- end }}

{{- define "echo-memory.selectorLabels" -}}
app.kubernetes.io/name: {{ include "echo-memory.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "echo-memory.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "echo-memory.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "echo-memory.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* Service name of the bundled NATS (the official chart's fullname rule). */}}
{{- define "echo-memory.natsHost" -}}
{{- if .Values.nats.fullnameOverride }}
{{- .Values.nats.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains "nats" .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-nats" .Release.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{/* Environment every Echo Memory process gets: NATS URL and its own NATS user, default org, telemetry.
Called with (list $ user): the user is the component's NATS user (a service's name, edge, admin). */}}
{{- define "echo-memory.env" -}}
{{- $ctx := index . 0 }}{{ $user := index . 1 }}
{{- with $ctx }}
{{- if .Values.nats.enabled }}
{{- if not .Values.natsAuth.enabled }}
{{- fail "natsAuth.enabled=false is only for an external NATS (nats.enabled=false): the bundled NATS always authenticates each component" }}
{{- end }}
- name: ECHO_MEMORY_NATS_URL
  value: {{ printf "nats://%s.%s.svc:4222" (include "echo-memory.natsHost" .) .Release.Namespace | quote }}
{{- else if .Values.externalNats.urlSecret.name }}
- name: ECHO_MEMORY_NATS_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.externalNats.urlSecret.name }}
      key: {{ .Values.externalNats.urlSecret.key }}
{{- else }}
- name: ECHO_MEMORY_NATS_URL
  value: {{ required "nats.enabled=false needs externalNats.url or externalNats.urlSecret.name" .Values.externalNats.url | quote }}
{{- end }}
{{- if .Values.natsAuth.enabled }}
# This component's own NATS user: its Secret is the only NATS credential the pod can read.
- name: ECHO_MEMORY_NATS_USER
  valueFrom:
    secretKeyRef:
      name: {{ include "echo-memory.natsUserSecret" (list . $user) }}
      key: user
- name: ECHO_MEMORY_NATS_PASSWORD
  valueFrom:
    secretKeyRef:
      name: {{ include "echo-memory.natsUserSecret" (list . $user) }}
      key: password
{{- end }}
- name: ECHO_MEMORY_ORG
  value: {{ .Values.org | quote }}
{{- if .Values.defaultDatabase.existingSecret }}
- name: ECHO_MEMORY_DATABASE_URL
  valueFrom:
    secretKeyRef:
      name: {{ .Values.defaultDatabase.existingSecret }}
      key: {{ .Values.defaultDatabase.key }}
{{- end }}
- name: ECHO_MEMORY_LOG_LEVEL
  value: {{ .Values.logLevel | quote }}
{{- if .Values.telemetry.otlpEndpoint }}
- name: OTEL_EXPORTER_OTLP_ENDPOINT
  value: {{ .Values.telemetry.otlpEndpoint | quote }}
- name: OTEL_EXPORTER_OTLP_PROTOCOL
  value: {{ .Values.telemetry.otlpProtocol | quote }}
{{- end }}
{{- if .Values.telemetry.resourceAttributes }}
- name: OTEL_RESOURCE_ATTRIBUTES
  value: {{ .Values.telemetry.resourceAttributes | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}
{{- end }}

{{/* The Secret with one component's NATS user and password: (list $ user). */}}
{{- define "echo-memory.natsUserSecret" -}}
{{- printf "%s-%s" (index . 0).Values.natsAuth.secretName (index . 1) }}
{{- end }}

{{/* Operator rules in its namespaces: exactly the verbs it uses (operator/echo_operator/kube.py). */}}
{{- define "echo-memory.operatorRules" }}
- apiGroups: [echo-memory.io]
  resources: [memoryorgs, memoryscopes, memoryagents]
  verbs: [get, list, watch, patch]
- apiGroups: [echo-memory.io]
  resources: [memoryorgs/status, memoryscopes/status, memoryagents/status]
  verbs: [get, patch]
# Children carry ownerReferences with blockOwnerDeletion (Jobs of an org, token Secrets of an agent):
# OwnerReferencesPermissionEnforcement (OpenShift's default) requires `update` on the owner's finalizers.
- apiGroups: [echo-memory.io]
  resources: [memoryorgs/finalizers, memoryagents/finalizers]
  verbs: [update]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [get, create, delete]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, create, delete]
- apiGroups: [batch]
  resources: [jobs]
  verbs: [get, create]
- apiGroups: [postgresql.cnpg.io]
  resources: [clusters]
  verbs: [get, create, delete]
{{- end }}

{{/* The JSON the operator applies to the pods it makes (operator/echo_operator/manifests/pods.py). */}}
{{- define "echo-memory.managedPodSettings" -}}
{{- $m := .Values.operator.managedPods -}}
{{- $out := dict "imagePullSecrets" (default list .Values.imagePullSecrets) "nodeSelector" (default dict $m.nodeSelector) "tolerations" (default list $m.tolerations) "affinity" (default dict $m.affinity) "podAnnotations" (merge (dict) (default dict $m.podAnnotations) (default dict .Values.podAnnotations)) "podLabels" (merge (dict) (default dict $m.podLabels) (default dict .Values.podLabels)) -}}
{{- with (default .Values.priorityClassName $m.priorityClassName) }}{{ $_ := set $out "priorityClassName" . }}{{ end -}}
{{- with $m.jobResources }}{{ $_ := set $out "jobResources" . }}{{ end -}}
{{- with $m.postgresResources }}{{ $_ := set $out "postgresResources" . }}{{ end -}}
{{- toJson $out -}}
{{- end }}

{{/* The Secret that holds every operator-managed org's database password (mounted by the services). */}}
{{- define "echo-memory.orgCredentialsSecret" -}}
{{- default (printf "%s-org-credentials" (include "echo-memory.fullname" .)) .Values.orgCredentials.secretName }}
{{- end }}

{{/* Pod metadata of a Deployment's pods: selector labels plus the user's labels and annotations. */}}
{{- define "echo-memory.podMetadata" -}}
{{- $ctx := index . 0 }}{{ $component := index . 1 }}
labels:
  {{- with $ctx.Values.podLabels }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- include "echo-memory.selectorLabels" $ctx | nindent 2 }}
  app.kubernetes.io/component: {{ $component }}
{{- with $ctx.Values.podAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end }}

{{/* Scheduling fields shared by every Deployment: priority class and topology spread. */}}
{{- define "echo-memory.podScheduling" -}}
{{- $ctx := index . 0 }}{{ $component := index . 1 }}
{{- with $ctx.Values.priorityClassName }}
priorityClassName: {{ . | quote }}
{{- end }}
{{- with $ctx.Values.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- range . }}
  - {{- toYaml (omit . "labelSelector") | nindent 4 }}
    labelSelector:
      matchLabels:
        {{- include "echo-memory.selectorLabels" $ctx | nindent 8 }}
        app.kubernetes.io/component: {{ $component }}
  {{- end }}
{{- end }}
{{- end }}
