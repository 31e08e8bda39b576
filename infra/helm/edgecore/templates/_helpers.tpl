{{/* Names: every object is "<release>-<component>", so two releases never collide. */}}
{{- define "edgecore.name" -}}
{{- printf "%s-%s" (.root.Release.Name | trunc 40 | trimSuffix "-") .component -}}
{{- end }}

{{- define "edgecore.labels" -}}
app.kubernetes.io/name: edgecore
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
app.kubernetes.io/part-of: edgecore
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
edgecore.io/region: {{ .root.Values.region | quote }}
{{- end }}

{{- define "edgecore.selector" -}}
app.kubernetes.io/name: edgecore
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "edgecore.image" -}}
{{- if .digest -}}
{{- printf "%s:%s@%s" .repository .tag .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository .tag -}}
{{- end -}}
{{- end }}

{{/*
A settings value as an environment string: maps and lists as JSON (pydantic-settings parses
them), whole numbers without Helm's float formatting (1e+06), the rest as text.
*/}}
{{- define "edgecore.envValue" -}}
{{- if or (kindIs "map" .) (kindIs "slice" .) -}}
{{- toJson . -}}
{{- else if and (kindIs "float64" .) (eq . (float64 (int64 .))) -}}
{{- int64 . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end }}

{{/* ConfigMap data from a settings map: {prefix, settings}; keys are settings field names,
a map is a section (its fields become SECTION__FIELD, the services' nested names). */}}
{{- define "edgecore.settingsData" -}}
{{- range $key, $value := .settings }}
{{- if kindIs "map" $value }}
{{- range $field, $inner := $value }}
{{- if not (kindIs "invalid" $inner) }}
{{ printf "%s%s__%s" $.prefix (upper $key) (upper $field) }}: {{ include "edgecore.envValue" $inner | quote }}
{{- end }}
{{- end }}
{{- else if not (kindIs "invalid" $value) }}
{{ printf "%s%s" $.prefix (upper $key) }}: {{ include "edgecore.envValue" $value | quote }}
{{- end }}
{{- end }}
{{- end }}

{{- define "edgecore.podSecurity" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
fsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "edgecore.containerSecurity" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: ["ALL"]
{{- end }}

{{/* Engine pods: multi-node (Ray, LeaderWorkerSet) or one pod per replica. */}}
{{- define "edgecore.engineMultiNode" -}}
{{- if eq (.Values.engines.config.distributed_executor_backend | default "") "ray" -}}true{{- end -}}
{{- end }}

{{/* GPUs per engine pod: TP x PP on one node; TP per node when PP stages span nodes (Ray). */}}
{{- define "edgecore.engineGpusPerPod" -}}
{{- $c := .Values.engines.config -}}
{{- $tp := $c.tensor_parallel_size | default 1 | int -}}
{{- $pp := $c.pipeline_parallel_size | default 1 | int -}}
{{- if include "edgecore.engineMultiNode" . -}}{{ $tp }}{{- else -}}{{ mul $tp $pp }}{{- end -}}
{{- end }}

{{/*
vLLM's flags, mirroring core.settings.EngineConfig.command() after
`python3 -m vllm.entrypoints.openai.api_server` (same flags, same order), with the pod's
host and port; the container's command holds the module.
tests/test_infra_chart.py compares the two for every values file.
*/}}
{{- define "edgecore.engineArgs" -}}
{{- $c := .Values.engines.config -}}
- --model
- {{ required "engines.config.model is required" $c.model | quote }}
- --served-model-name
- {{ required "engines.config.served_model_name is required" $c.served_model_name | quote }}
- --host
- "0.0.0.0"
- --port
- {{ .Values.engines.port | int | quote }}
- --tensor-parallel-size
- {{ $c.tensor_parallel_size | default 1 | int | quote }}
- --pipeline-parallel-size
- {{ $c.pipeline_parallel_size | default 1 | int | quote }}
- --dtype
- {{ $c.dtype | default "auto" | quote }}
- --disable-uvicorn-access-log
{{- with $c.distributed_executor_backend }}
- --distributed-executor-backend
- {{ . | quote }}
{{- end }}
{{- with $c.quantization }}
- --quantization
- {{ . | quote }}
{{- end }}
{{- $maxLen := hasKey $c "max_model_len" | ternary $c.max_model_len 4096 }}
{{- with $maxLen }}
- --max-model-len
- {{ . | int | quote }}
{{- end }}
{{- with $c.max_num_seqs }}
- --max-num-seqs
- {{ . | int | quote }}
{{- end }}
{{- with $c.tool_call_parser }}
- --enable-auto-tool-choice
- --tool-call-parser
- {{ . | quote }}
{{- end }}
{{- with $c.gpu_memory_utilization }}
- --gpu-memory-utilization
- {{ toString . | quote }}
{{- end }}
{{- if kindIs "bool" $c.enable_prefix_caching }}
- {{ $c.enable_prefix_caching | ternary "--enable-prefix-caching" "--no-enable-prefix-caching" }}
{{- end }}
{{- if (hasKey $c "enforce_eager" | ternary $c.enforce_eager true) }}
- --enforce-eager
{{- end }}
{{- with $c.speculative }}
- --speculative-config
- {{ toJson . | quote }}
{{- end }}
{{- with $c.otlp_traces_endpoint }}
- --otlp-traces-endpoint
- {{ . | quote }}
{{- end }}
{{- range $c.extra_args }}
- {{ . | quote }}
{{- end }}
{{- end }}
