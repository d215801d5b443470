{{/* nri-qos chart helpers. */}}
{{- define "nri-qos.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{/* The chart's name (nameOverride), for app.kubernetes.io/name. */}}
{{- define "nri-qos.name" -}}
{{ .Values.nameOverride | default .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end -}}

{{/* The objects' base name (Helm's convention): fullnameOverride, else the release name
   (with the chart's name appended unless it contains it). At most 52 characters: a variant's
   suffix and "-policy" follow. */}}
{{- define "nri-qos.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{ .Values.fullnameOverride | trunc 52 | trimSuffix "-" }}
{{- else -}}
{{- $name := include "nri-qos.name" . -}}
{{- if contains $name .Release.Name -}}
{{ .Release.Name | trunc 52 | trimSuffix "-" }}
{{- else -}}
{{ printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" }}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "nri-qos.labels" -}}
app.kubernetes.io/name: {{ include "nri-qos.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* What every nri-qos pod gets from the values: pull secrets, priority, placement. Called with
   the root context and the variant ("" = the default set) as a dict. */}}
{{- define "nri-qos.podPlacement" -}}
{{- $v := .root.Values -}}
{{- with $v.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- if or $v.nodeSelector .variant }}
nodeSelector:
  {{- with $v.nodeSelector }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
  {{- if .variant }}
  {{ $v.variantLabel }}: {{ .variant | quote }}
  {{- end }}
{{- end }}
{{- $avoid := and (not .variant) $v.policyVariants .avoidVariants -}}
{{- if or $v.affinity $avoid }}
{{- $aff := deepCopy ($v.affinity | default dict) -}}
{{- if $avoid }}
{{- $names := list -}}
{{- range $v.policyVariants }}{{ $names = append $names .name }}{{ end }}
{{- $expr := dict "key" $v.variantLabel "operator" "NotIn" "values" $names -}}
{{- $na := get $aff "nodeAffinity" | default dict -}}
{{- $req := get $na "requiredDuringSchedulingIgnoredDuringExecution" | default dict -}}
{{- $terms := get $req "nodeSelectorTerms" | default list -}}
{{- if not $terms }}{{ $terms = list (dict "matchExpressions" list) }}{{ end -}}
{{- $new := list -}}
{{- range $terms }}
{{- $t := deepCopy . -}}
{{- $_ := set $t "matchExpressions" (append (get $t "matchExpressions" | default list) $expr) -}}
{{- $new = append $new $t -}}
{{- end }}
{{- $_ := set $req "nodeSelectorTerms" $new -}}
{{- $_ := set $na "requiredDuringSchedulingIgnoredDuringExecution" $req -}}
{{- $_ := set $aff "nodeAffinity" $na -}}
{{- end }}
affinity:
  {{- toYaml $aff | nindent 2 }}
{{- end }}
{{- with $v.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $v.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- end -}}

{{/* The update strategy of the node DaemonSets (values.yaml: why maxSurge stays 0). */}}
{{- define "nri-qos.updateStrategy" -}}
updateStrategy:
  type: RollingUpdate
  rollingUpdate:
    maxUnavailable: {{ .Values.updateStrategy.rollingUpdate.maxUnavailable }}
    maxSurge: 0
{{- end -}}

{{/*
One DaemonSet + its policy ConfigMap. Called with a dict:
  root     the chart's root context
  suffix   "" for the default set, "-<variant>" for a variant
  policy   the TOML text
  variant  the variant name ("" for the default set, which avoids every variant's nodes)
*/}}
{{- define "nri-qos.node" -}}
{{- $root := .root -}}
{{- $v := $root.Values -}}
{{- $name := printf "%s%s" (include "nri-qos.fullname" $root) .suffix -}}
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ $name }}-policy
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "nri-qos.labels" $root | nindent 4 }}
    app.kubernetes.io/component: policy
data:
  nri-qos.toml: {{ .policy | quote }}
---
apiVersion: apps/v1
kind: DaemonSet
metadata:
  name: {{ $name }}
  namespace: {{ $root.Release.Namespace }}
  labels:
    {{- include "nri-qos.labels" $root | nindent 4 }}
    app.kubernetes.io/component: installer
spec:
  selector:
    matchLabels:
      app.kubernetes.io/name: {{ include "nri-qos.name" $root }}
      app.kubernetes.io/instance: {{ $root.Release.Name }}
      app.kubernetes.io/component: installer
      nri-qos.io/set: {{ $name | quote }}
  # maxSurge 0: two nri-qos pods on one node would register two relays setting the same fields
  {{- include "nri-qos.updateStrategy" $root | nindent 2 }}
  template:
    metadata:
      labels:
        {{- include "nri-qos.labels" $root | nindent 8 }}
        app.kubernetes.io/component: installer
        nri-qos.io/set: {{ $name | quote }}
        {{- with $v.podLabels }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      annotations:
        {{- with $v.podAnnotations }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
        # A new policy text rolls nothing: policy-sync installs it in place (no pod restart).
        nri-qos.io/mode: {{ $v.mode | quote }}
        # containerd >= 2.2 requiring nri-qos (default_validator required_plugins): the relay's
        # own pod must start before nri-qos is registered; only where the runtime's
        # tolerate_missing_plugins_annotation names this key (docs/native-nri.md).
        tolerate-missing-nri-plugins.noderesource.dev: "true"
    spec:
      {{- include "nri-qos.podPlacement" (dict "root" $root "variant" .variant "avoidVariants" true) | nindent 6 }}
      automountServiceAccountToken: false
      hostPID: true
      terminationGracePeriodSeconds: 5
      initContainers:
        - name: install
          image: {{ include "nri-qos.image" $root }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          command: ["/bin/sh", "/usr/local/bin/nri-qos-install", "install"]
          env:
            - name: HOST_ROOT
              value: /host
            - name: POLICY_SRC
              value: /etc/nri-qos-policy/nri-qos.toml
            - name: NRI_QOS_MODE
              value: {{ $v.mode | quote }}
            - name: NRI_QOS_INDEX
              value: {{ $v.pluginIndex | quote }}
            - name: NRI_SOCKET
              value: {{ $v.nriSocket | quote }}
            {{- if $v.pluginConf }}
            - name: NRI_QOS_PLUGIN_CONF
              value: {{ $v.pluginConf | quote }}
            {{- end }}
          securityContext:
            runAsUser: 0
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
              add: ["CHOWN", "DAC_OVERRIDE", "FOWNER"]
          resources:
            {{- toYaml $v.resources.install | nindent 12 }}
          volumeMounts:
            - name: host-opt-nri
              mountPath: /host/opt/nri
            - name: host-etc-nri
              mountPath: /host/etc/nri
            - name: policy
              mountPath: /etc/nri-qos-policy
              readOnly: true
            # the policy at the node's path, the node's cache and last good store: `nri-qos
            # check --cache-dir` precompiles where the hook and the relay read
            - name: host-etc-nri
              mountPath: /etc/nri
              readOnly: true
            - name: host-state
              mountPath: /run/nri-qos
            - name: host-last-good
              mountPath: /var/lib/nri-qos
            - name: host-nri-socket
              mountPath: /host{{ dir $v.nriSocket }}
              readOnly: true
            - name: pod-mode
              mountPath: /run/nri-qos-pod
      containers:
        - name: relay
          image: {{ include "nri-qos.image" $root }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          command: ["/bin/sh", "/usr/local/bin/nri-qos-install", "relay"]
          {{- with $v.extraArgs }}
          # appended to `nri-qos relay --socket ...` (mode external)
          args:
            {{- toYaml . | nindent 12 }}
          {{- end }}
          env:
            - name: NRI_SOCKET
              value: {{ $v.nriSocket | quote }}
            # `nri-qos relay --kubelet-cpu-state` (kubelet's directory mounted read-only below)
            - name: NRI_QOS_KUBELET_CPU_STATE
              value: {{ printf "%s/cpu_manager_state" $v.kubeletDir | quote }}
            # the runtime's CRI socket for the relay's unseen pass (relay --cri-socket; its
            # directory mounted read-only below); "" = no pass (--unseen-interval 0)
            - name: NRI_QOS_CRI_SOCKET
              value: {{ $v.criSocket | quote }}
            {{- if $v.metrics.enabled }}
            # /metrics on the pod's address (relay --metrics-listen; serve-metrics in the other modes)
            - name: NRI_QOS_METRICS_LISTEN
              value: {{ printf "0.0.0.0:%v" $v.metrics.port | quote }}
            {{- end }}
            {{- with $v.extraEnv }}
            {{- toYaml . | nindent 12 }}
            {{- end }}
          {{- if $v.metrics.enabled }}
          ports:
            - name: metrics
              containerPort: {{ $v.metrics.port }}
              protocol: TCP
          {{- end }}
          # Ready once the relay has registered with the runtime (`status --relay` exits 0 only
          # then: src/cli/status.cpp relay_liveness), so that a rolling update moves to the next
          # node only after this one's new relay serves events; in the other modes the runtime
          # runs the hook itself and the pod is ready at once.
          readinessProbe:
            exec:
              command: ["/bin/sh", "-c", "[ \"$(cat /run/nri-qos-pod/mode)\" != external ] || /opt/nri/bin/nri-qos status --relay >/dev/null"]
            periodSeconds: 5
            timeoutSeconds: 5
            failureThreshold: 1
          livenessProbe:
            exec:
              command: ["/bin/sh", "-c", "[ \"$(cat /run/nri-qos-pod/mode)\" != external ] || /opt/nri/bin/nri-qos status --relay >/dev/null"]
            initialDelaySeconds: 30
            periodSeconds: 30
            timeoutSeconds: 5
            failureThreshold: 3
          # Not privileged (docs/install.md, "Kubernetes", the relay's capabilities): DAC_OVERRIDE
          # for /proc/<pid>/oom_score_adj of containers of other users and host directories of
          # other packages; SYS_RESOURCE for an oom_score_adj below the one runc set. AppArmor
          # unconfined: the default profile denies writes under /sys/fs/resctrl; seccomp
          # unconfined: the relay confines each evaluation itself (seccomp filter + Landlock);
          # SELinux spc_t: container_t may write neither cgroups nor other containers' /proc.
          securityContext:
            runAsUser: 0
            privileged: false
            allowPrivilegeEscalation: false
            capabilities:
              drop: ["ALL"]
              add: ["DAC_OVERRIDE", "SYS_RESOURCE"]
            appArmorProfile:
              type: Unconfined
            seccompProfile:
              type: Unconfined
            seLinuxOptions:
              type: spc_t
          resources:
            {{- toYaml $v.resources.relay | nindent 12 }}
          volumeMounts:
            - name: host-etc-nri
              mountPath: /etc/nri
              readOnly: true
            - name: host-nri-socket
              mountPath: {{ dir $v.nriSocket }}
            - name: host-cgroup
              mountPath: /sys/fs/cgroup
            {{- if ne (toString $v.resctrl) "false" }}
            - name: host-resctrl
              mountPath: /sys/fs/resctrl
              mountPropagation: HostToContainer
            {{- end }}
            - name: host-kubelet
              mountPath: {{ $v.kubeletDir }}
              readOnly: true
              recursiveReadOnly: IfPossible
            - name: host-systemd
              mountPath: /run/systemd
              readOnly: true
            {{- if $v.criSocket }}
            # the CRI socket's directory, not the file: the runtime makes a new socket when it
            # restarts, which a mounted file would not show (values.yaml criSocket)
            - name: host-cri
              mountPath: {{ dir $v.criSocket }}
              readOnly: true
            {{- end }}
            - name: host-state
              mountPath: /run/nri-qos
            - name: host-last-good
              mountPath: /var/lib/nri-qos
            - name: host-log
              mountPath: /var/log/nri-qos
            - name: host-textfile
              mountPath: {{ $v.textfileDir }}
            - name: pod-mode
              mountPath: /run/nri-qos-pod
              readOnly: true
        - name: policy-sync
          image: {{ include "nri-qos.image" $root }}
          imagePullPolicy: {{ $v.image.pullPolicy }}
          command: ["/bin/sh", "/usr/local/bin/nri-qos-install", "sync-policy"]
          env:
            - name: HOST_ROOT
              value: /host
            - name: POLICY_SRC
              value: /etc/nri-qos-policy/nri-qos.toml
            - name: NRI_QOS_SYNC_SECONDS
              value: {{ $v.policySyncSeconds | quote }}
          securityContext:
            runAsUser: 0
            allowPrivilegeEscalation: false
            readOnlyRootFilesystem: true
            capabilities:
              drop: ["ALL"]
              add: ["CHOWN", "DAC_OVERRIDE", "FOWNER"]
          resources:
            {{- toYaml $v.resources.policySync | nindent 12 }}
          volumeMounts:
            - name: host-etc-nri
              mountPath: /host/etc/nri
            - name: policy
              mountPath: /etc/nri-qos-policy
              readOnly: true
            - name: host-etc-nri
              mountPath: /etc/nri
              readOnly: true
            - name: host-state
              mountPath: /run/nri-qos
            - name: host-last-good
              mountPath: /var/lib/nri-qos
      volumes:
        - name: host-opt-nri
          hostPath:
            path: /opt/nri
            type: DirectoryOrCreate
        - name: host-etc-nri
          hostPath:
            path: /etc/nri
            type: DirectoryOrCreate
        - name: policy
          configMap:
            name: {{ $name }}-policy
        - name: pod-mode
          emptyDir:
            medium: Memory
            sizeLimit: 1Mi
        - name: host-nri-socket
          hostPath:
            path: {{ dir $v.nriSocket }}
            type: DirectoryOrCreate
        - name: host-cgroup
          hostPath:
            path: /sys/fs/cgroup
            type: Directory
        {{- if ne (toString $v.resctrl) "false" }}
        - name: host-resctrl
          hostPath:
            path: /sys/fs/resctrl
            type: Directory
        {{- end }}
        - name: host-kubelet
          hostPath:
            path: {{ $v.kubeletDir }}
            type: Directory
        - name: host-systemd
          hostPath:
            path: /run/systemd
            type: DirectoryOrCreate
        {{- if $v.criSocket }}
        - name: host-cri
          hostPath:
            path: {{ dir $v.criSocket }}
            type: DirectoryOrCreate
        {{- end }}
        - name: host-state
          hostPath:
            path: /run/nri-qos
            type: DirectoryOrCreate
        - name: host-last-good
          hostPath:
            path: /var/lib/nri-qos
            type: DirectoryOrCreate
        - name: host-log
          hostPath:
            path: /var/log/nri-qos
            type: DirectoryOrCreate
        - name: host-textfile
          hostPath:
            path: {{ $v.textfileDir }}
            type: DirectoryOrCreate
{{- end -}}
