#!/usr/bin/env bash
# images/build.sh build|push: the images the deploy runs, built and pushed
# with buildah under one naming scheme (`make images`, `make push`):
#
#   $IMAGE_REPO/mountpod:$VERSION     images/Dockerfile
#   $IMAGE_REPO/csi-driver:$VERSION   images/csi-driver/Dockerfile
#
# IMAGE_REPO is $REGISTRY/mountcontainers (REGISTRY default localhost, the
# name buildah gives a local image and deploy/'s overlays render), VERSION
# `git describe` (the Makefile passes both, and REVISION). Each name is a
# manifest list of the platforms in PLATFORMS (comma-separated, default the
# machine's). The Go programs are compiled on the machine's platform for
# each target (the Dockerfiles' build stages, BUILDPLATFORM); a target other
# than the machine's runs its runtime stage's RUN steps under emulation
# (qemu-user-static registered with binfmt_misc, flag F; make e2e-multiarch
# sets it up and checks the arm64 images).
#
# push pushes every platform of each list to the registry and writes, for
# the version pushed, the digests to pin (docs/quickstart.md):
#   $OUT/values-images.yaml   Helm values: helm install -f it
#   $OUT/kustomize-images.yaml  an images: list for a kustomization of yours
# PUSH_ARGS adds arguments to buildah manifest push (--tls-verify=false for
# a registry without TLS, --creds=...), BUILD_ARGS to buildah build
# (--build-arg GO_IMAGE=..., BASE_IMAGE=..., GOPROXY=...).
set -euo pipefail
cd "$(dirname "$0")/.."

action=${1:?usage: images/build.sh build|push}
: "${REGISTRY:=localhost}" "${VERSION:?}" "${REVISION:=unknown}"
IMAGE_REPO=${IMAGE_REPO:-$REGISTRY/mountcontainers}
PLATFORMS=${PLATFORMS:-linux/$(go env GOARCH)}
OUT=${OUT:-bin/images}
read -r -a buildah <<<"${BUILDAH:-buildah}"
read -r -a build_args <<<"${BUILD_ARGS:-}"
read -r -a push_args <<<"${PUSH_ARGS:-}"

declare -A dockerfile=([mountpod]=images/Dockerfile [csi-driver]=images/csi-driver/Dockerfile)
names=(mountpod csi-driver)

die() {
	echo "images/build.sh: $*" >&2
	exit 1
}
command -v "${buildah[0]}" >/dev/null || die "${buildah[0]} is not installed (apt-get install buildah)"
[[ $VERSION =~ ^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$ ]] || die "VERSION $VERSION is no image tag"

case $action in
build)
	# The compiler runs on this machine's platform (the Dockerfiles' build
	# stages), whatever the targets.
	build_platform=$("${buildah[@]}" info --format '{{.host.os}}/{{.host.arch}}') ||
		die "${buildah[0]} info failed"
	for name in "${names[@]}"; do
		ref=$IMAGE_REPO/$name:$VERSION
		# A list of this name from an earlier build would gain a second
		# image per platform: start it anew.
		if "${buildah[@]}" manifest exists "$ref" 2>/dev/null; then
			"${buildah[@]}" manifest rm "$ref" >/dev/null
		fi
		echo "images/build.sh: building $ref for $PLATFORMS" >&2
		"${buildah[@]}" build --isolation=chroot --platform "$PLATFORMS" --manifest "$ref" \
			-f "${dockerfile[$name]}" --build-arg "BUILDPLATFORM=$build_platform" \
			--build-arg "VERSION=$VERSION" --build-arg "REVISION=$REVISION" \
			"${build_args[@]}" .
	done
	;;
push)
	mkdir -p "$OUT"
	declare -A digest
	for name in "${names[@]}"; do
		ref=$IMAGE_REPO/$name:$VERSION
		"${buildah[@]}" manifest exists "$ref" 2>/dev/null || die "no image $ref: run make images first (same REGISTRY and VERSION)"
		file=$(mktemp)
		"${buildah[@]}" manifest push --all --digestfile "$file" "${push_args[@]}" "$ref" "docker://$ref"
		digest[$name]=$(cat "$file")
		rm -f "$file"
		[[ ${digest[$name]} =~ ^sha256:[0-9a-f]{64}$ ]] || die "push of $ref gave no digest (${digest[$name]})"
		echo "pushed $ref@${digest[$name]}"
	done
	# Written whole, then renamed: a failed push leaves the last good files.
	cat >"$OUT/values-images.yaml.tmp" <<-YAML
		# Written by make push: the images of $VERSION (revision $REVISION), pinned by digest.
		# helm install ... -f $OUT/values-images.yaml
		images:
		  mountpod:
		    repository: $IMAGE_REPO/mountpod
		    tag: "$VERSION"
		    digest: ${digest[mountpod]}
		  csiDriver:
		    repository: $IMAGE_REPO/csi-driver
		    tag: "$VERSION"
		    digest: ${digest[csi-driver]}
	YAML
	cat >"$OUT/kustomize-images.yaml.tmp" <<-YAML
		# Written by make push: the images of $VERSION (revision $REVISION), pinned by
		# digest, for the images: list of a kustomization over deploy/'s overlays.
		images:
		  - name: localhost/mountcontainers/mountpod
		    newName: $IMAGE_REPO/mountpod
		    digest: ${digest[mountpod]}
		  - name: localhost/mountcontainers/csi-driver
		    newName: $IMAGE_REPO/csi-driver
		    digest: ${digest[csi-driver]}
	YAML
	mv "$OUT/values-images.yaml.tmp" "$OUT/values-images.yaml"
	mv "$OUT/kustomize-images.yaml.tmp" "$OUT/kustomize-images.yaml"
	echo "wrote $OUT/values-images.yaml and $OUT/kustomize-images.yaml"
	;;
*) die "unknown action $action (build or push)" ;;
esac
