{{/* An engine pod template: role single (StatefulSet), leader or worker (LeaderWorkerSet). */}}
{{- define "edgecore.enginePod" }}
{{- $g := .root.Values.engines }}
{{- $ctx := dict "root" .root "component" "engine" }}
metadata:
  labels: {{- include "edgecore.labels" $ctx | nindent 4 }}
  annotations:
    edgecore.io/profile: {{ $g.profile | quote }}
    checksum/config: {{ toJson $g.config | sha256sum }}
spec:
  {{- with .root.Values.imagePullSecrets }}
  imagePullSecrets: {{- toYaml . | nindent 4 }}
  {{- end }}
  automountServiceAccountToken: false
  terminationGracePeriodSeconds: 120
  securityContext: {{- include "edgecore.podSecurity" .root | nindent 4 }}
  containers:
    - name: vllm
      image: {{ include "edgecore.image" .root.Values.images.core }}
      imagePullPolicy: {{ .root.Values.images.core.pullPolicy }}
      {{- if eq .role "single" }}
      command: ["python3", "-m", "vllm.entrypoints.openai.api_server"]
      args: {{- include "edgecore.engineArgs" .root | nindent 8 }}
      {{- else if eq .role "leader" }}
      # Starts the Ray head, waits for the group's workers, then execs vLLM.
      command: ["bash", "/etc/edgecore/ray/ray-node.sh", "leader", "python3", "-m", "vllm.entrypoints.openai.api_server"]
      args: {{- include "edgecore.engineArgs" .root | nindent 8 }}
      {{- else }}
      command: ["bash", "/etc/edgecore/ray/ray-node.sh", "worker"]
      {{- end }}
      env:
        # The same environment core/engine.py gives a supervised engine: no hub, no telemetry.
        - {name: HF_HUB_OFFLINE, value: "1"}
        - {name: TRANSFORMERS_OFFLINE, value: "1"}
        - {name: VLLM_NO_USAGE_STATS, value: "1"}
        - {name: DO_NOT_TRACK, value: "1"}
        - {name: VLLM_CACHE_ROOT, value: /var/cache/vllm}
        # Non-root, read-only image: every cache and HOME on the writable emptyDirs.
        - {name: HOME, value: /var/cache/vllm/home}
        - {name: XDG_CACHE_HOME, value: /var/cache/vllm/xdg}
        - {name: TRITON_CACHE_DIR, value: /var/cache/vllm/triton}
        - {name: TORCHINDUCTOR_CACHE_DIR, value: /var/cache/vllm/inductor}
        - {name: NUMBA_CACHE_DIR, value: /var/cache/vllm/numba}
        - {name: PYTHONDONTWRITEBYTECODE, value: "1"}
        {{- if and (ne .role "worker") $g.apiKey.secretName }}
        # vLLM requires this key on /v1/* (its --api-key; /health and /metrics stay open).
        - name: VLLM_API_KEY
          valueFrom:
            secretKeyRef: {name: {{ $g.apiKey.secretName }}, key: api-key}
        {{- end }}
        - {name: RAY_PORT, value: {{ $g.rayPort | int | quote }}}
        {{- if ne .role "single" }}
        # vLLM and Ray advertise this address to the other pipeline stage.
        - name: VLLM_HOST_IP
          valueFrom:
            fieldRef: {fieldPath: status.podIP}
        {{- end }}
      ports:
        {{- if ne .role "worker" }}
        - {name: http, containerPort: {{ $g.port }}, protocol: TCP}
        {{- end }}
        {{- if ne .role "single" }}
        - {name: ray, containerPort: {{ $g.rayPort }}, protocol: TCP}
        {{- end }}
      {{- if ne .role "worker" }}
      startupProbe:
        httpGet: {path: /health, port: http}
        periodSeconds: 10
        failureThreshold: {{ mul $g.startupMinutes 6 }}
      readinessProbe:
        httpGet: {path: /health, port: http}
        periodSeconds: 5
      livenessProbe:
        httpGet: {path: /health, port: http}
        periodSeconds: 15
        failureThreshold: 4
      {{- end }}
      resources:
        requests:
          {{- toYaml $g.resources.requests | nindent 10 }}
          nvidia.com/gpu: {{ .gpus }}
        limits:
          {{- toYaml $g.resources.limits | nindent 10 }}
          nvidia.com/gpu: {{ .gpus }}
      securityContext:
        allowPrivilegeEscalation: false
        readOnlyRootFilesystem: {{ $g.readOnlyRootFilesystem }}
        capabilities:
          drop: ["ALL"]
      volumeMounts:
        - {name: models, mountPath: /models, readOnly: true}
        - {name: shm, mountPath: /dev/shm}
        - {name: cache, mountPath: /var/cache/vllm}
        - {name: tmp, mountPath: /tmp}
        {{- if ne .role "single" }}
        - {name: ray-scripts, mountPath: /etc/edgecore/ray, readOnly: true}
        {{- end }}
  volumes:
    - name: models
      persistentVolumeClaim: {claimName: {{ $g.modelVolume.claimName }}, readOnly: true}
    - name: shm
      emptyDir: {medium: Memory, sizeLimit: {{ $g.shmSize }}}
    - name: cache
      emptyDir: {}
    - name: tmp   # Ray's session files live here
      emptyDir: {}
    {{- if ne .role "single" }}
    - name: ray-scripts
      configMap: {name: {{ include "edgecore.name" $ctx }}-ray}
    {{- end }}
  {{- with $g.nodeSelector }}
  nodeSelector: {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with $g.tolerations }}
  tolerations: {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
