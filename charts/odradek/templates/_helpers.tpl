{{- define "odradek.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "odradek.labels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "odradek.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "odradek.serviceAccountName" -}}
{{- default (include "odradek.fullname" .) .Values.serviceAccount.name -}}
{{- end -}}

{{- define "odradek.rackRole" -}}
{{- printf "%s-broker-rack" (include "odradek.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "odradek.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}

{{- define "odradek.clusterName" -}}
{{- default .Release.Name .Values.cluster.name -}}
{{- end -}}

{{- /* The operator's rights on namespaced objects (rbac.yaml: a Role per watched namespace, or
the ClusterRole when it watches every namespace). */ -}}
{{- define "odradek.operatorRules" -}}
- apiGroups: [odradek.dev]
  resources: [odradekclusters, odradekconnects, odradekconnectors, odradekmirrormaker2s]
  verbs: [get, list, watch, patch, update]
# OdradekTopics and OdradekUsers: the users' and an OdradekConnect's own (its storage topics, its workers' user),
# an OdradekMirrorMaker2's user.
- apiGroups: [odradek.dev]
  resources: [odradektopics, odradekusers]
  verbs: [get, list, watch, create, patch, update]
- apiGroups: [odradek.dev]
  resources: [odradekclusters/status, odradektopics/status, odradekusers/status, odradekconnects/status,
              odradekconnectors/status, odradekmirrormaker2s/status]
  verbs: [get, patch, update]
# OdradekRebalances: the users' (status) and spec.autoRebalance's own (created, deleted when done).
- apiGroups: [odradek.dev]
  resources: [odradekrebalances]
  verbs: [get, list, watch, create, patch, update, delete]
- apiGroups: [odradek.dev]
  resources: [odradekrebalances/status]
  verbs: [get, patch, update]
- apiGroups: [""]
  resources: [configmaps, services]
  verbs: [get, list, watch, create, patch, update]
- apiGroups: [apps]
  resources: [statefulsets, deployments]
  verbs: [get, list, watch, create, patch, update]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [get, list, watch, create, patch, update]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [get, create, patch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [get, list, watch, delete, patch]   # patch: the manual-rolling-update mark (evictions)
# OdradekUsers' Secrets (applied, owned by the user: garbage-collected with it), the Secrets
# their passwords are taken from, and the clusters' CAs, certificates and ZooKeeper digest
# (read, created, renewed; owned by the cluster). By name; never listed.
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [get, list, watch, patch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
- apiGroups: ["", events.k8s.io]
  resources: [events]
  verbs: [create, patch]
{{- if .Values.rbac.brokerRack }}
# Rack awareness: the brokers' ServiceAccount of a rack-aware cluster.
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [get, create, patch]
{{- end }}
{{- end -}}

{{/* The eviction webhook's ValidatingWebhookConfiguration: cluster-scoped, so per release namespace. */}}
{{- define "odradek.webhookConfiguration" -}}
{{ include "odradek.fullname" . }}-{{ .Release.Namespace }}-evictions
{{- end -}}
