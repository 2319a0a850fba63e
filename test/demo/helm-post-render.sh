#!/usr/bin/env bash
# helm-post-render.sh DIR KUBECTL: a post-renderer for `helm install
# --post-renderer` on the test bed: writes the chart's objects (standard
# input) to DIR/chart.yaml and prints what DIR's kustomization, written by
# test/demo/manifests.sh, makes of them (the bed's paths and images).
set -euo pipefail
dir=${1:?usage: helm-post-render.sh DIR KUBECTL}
kubectl=${2:?usage: helm-post-render.sh DIR KUBECTL}
cat >"$dir/chart.yaml"
exec "$kubectl" kustomize "$dir"
