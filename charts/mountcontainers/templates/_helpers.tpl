{{/*
mountcontainers.image: repository@digest when a digest is set, else
repository:tag. Argument: one entry of .Values.images.
*/}}
{{- define "mountcontainers.image" -}}
{{- if .digest -}}
{{- if not (hasPrefix "sha256:" .digest) -}}
{{- fail (printf "images: digest %q of %s is not sha256:<hex>" .digest .repository) -}}
{{- end -}}
{{- printf "%s@%s" .repository .digest -}}
{{- else -}}
{{- printf "%s:%s" .repository (required (printf "images: %s needs a tag or a digest" .repository) .tag) -}}
{{- end -}}
{{- end -}}

{{/*
mountcontainers.plugins: the enabled plugins (none with uninstall), in a fixed order, each with
what differs between them (the overlays deploy/glusterfs and deploy/cephfs),
as YAML: a list of dicts. Argument: the root context.
*/}}
{{- define "mountcontainers.plugins" -}}
{{- $out := list -}}
{{- if not .Values.uninstall -}}
{{- with .Values.plugins.glusterfs -}}
{{- if .enabled -}}
{{- $out = append $out (dict "name" "glusterfs" "plugin" "kubernetes.io/glusterfs" "driver" "mountcontainers.io/glusterfs" "logDir" "glusterfs" "metricsPort" 9641 "shim" true "secrets" false "allowedServers" (.allowedServers | toString) "sharedMounts" (ne (toString .sharedMounts) "false") "csi" .csi "csiTimeout" 150 "notOnArch" "") -}}
{{- end -}}
{{- end -}}
{{- with .Values.plugins.cephfs -}}
{{- if .enabled -}}
{{- $servers := required "plugins.cephfs.allowedServers: name the Ceph monitors volumes may use (a volume's key is sent to them), or set plugins.cephfs.enabled=false" .allowedServers -}}
{{- $out = append $out (dict "name" "cephfs" "plugin" "kubernetes.io/cephfs" "driver" "mountcontainers.io/cephfs" "logDir" "ceph" "metricsPort" 9643 "shim" false "secrets" true "allowedServers" ($servers | toString) "sharedMounts" true "csi" .csi "csiTimeout" 270 "notOnArch" "arm64") -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $out -}}
{{- end -}}

{{/*
mountcontainers.labels: the labels of every object of a plugin's mount pod.
Argument: dict "root" . "p" plugin.
*/}}
{{- define "mountcontainers.mountpodLabels" -}}
app.kubernetes.io/instance: {{ .p.name }}-mountpod
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/name: mountpod
app.kubernetes.io/part-of: mountcontainers
{{- end -}}

{{- define "mountcontainers.labels" -}}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: mountcontainers
{{- end -}}

{{/*
mountcontainers.kubeletArgs: the CSI driver's flags for a kubelet directory
other than /var/lib/kubelet (its default): as a YAML list's items, or
nothing. Argument: the root context.
*/}}
{{- define "mountcontainers.kubeletArgs" -}}
{{- if ne .Values.kubeletDir "/var/lib/kubelet" -}}
- {{ printf "--kubelet-dir=%s" .Values.kubeletDir | quote }}
- {{ printf "--registration-dir=%s/plugin-containers" .Values.kubeletDir | quote }}
{{- end -}}
{{- end -}}
