#!/usr/bin/env bash
# images.sh: build the test bed's container images without a registry.
#
#   images.sh all                          base, golang, pause, the mount-pod image and the test servers'
#   images.sh base [ARCH]                  debian:bookworm-slim from debootstrap; for another
#                                          architecture than the machine's (Debian's names: arm64),
#                                          localhost/mountcontainers/debian-ARCH:bookworm-slim, built
#                                          under emulation (qemu-user-static, installed and registered
#                                          with binfmt_misc when missing)
#   images.sh multiarch ARCH...            localhost/mountcontainers/debian:bookworm-slim, a manifest
#                                          list of the machine's base and each ARCH's (BASE_IMAGE for
#                                          images/build.sh with PLATFORMS of several)
#   images.sh golang                       golang:<go minor>-bookworm = base + host Go
#   images.sh pause                        localhost/mountcontainers/pause:dev
#   images.sh build NAME DOCKERFILE CONTEXT
#                                          localhost/mountcontainers/NAME:dev
#   images.sh provisioner              localhost/mountcontainers/csi-provisioner:dev from the
#                                          binary build-sidecars.sh builds (cached there)
#   images.sh import [NAME...]             import archives into the running bed's
#                                          containerd (all current ones by default)
#   images.sh sizes                        gzip and unpacked size of current images
#
# Images are built with buildah into a private storage under $MC_CACHE_DIR/buildah
# and exported as OCI archives into $MC_CACHE_DIR/images/oci/<name>-<key>.tar,
# where <key> hashes every input; an archive that exists is not rebuilt.
# $MC_CACHE_DIR/images/current/<name>.tar links to the archive of the last build,
# which up.sh imports.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$here/lib.sh"

SUITE=bookworm
IMAGE_PREFIX=localhost/mountcontainers
BASE_IMAGE=docker.io/library/debian:$SUITE-slim
GO_MINOR=$(go env GOVERSION | sed -E 's/^go([0-9]+\.[0-9]+).*/\1/')
GOLANG_IMAGE=docker.io/library/golang:$GO_MINOR-$SUITE
OCI_DIR=$IMAGE_CACHE_DIR/oci
CURRENT_DIR=$IMAGE_CACHE_DIR/current
BUILDAH_ROOT=$CACHE_DIR/buildah

bh() {
	buildah --root "$BUILDAH_ROOT/storage" --runroot "$BUILDAH_ROOT/run" --storage-driver overlay "$@"
}

sha() { sha256sum | cut -c1-16; }


have_image() { bh inspect --type image "$1" >/dev/null 2>&1; }

# publish NAME ARCHIVE: make ARCHIVE the current one for NAME.
publish() {
	mkdir -p "$CURRENT_DIR"
	ln -sfn "$2" "$CURRENT_DIR/$1.tar"
}

# push IMAGE ARCHIVE REF: export IMAGE as an OCI archive whose reference is REF.
push() {
	local tmp="$2.tmp.$$"
	rm -f "$tmp"
	bh push --quiet --format oci --compression-format gzip "$1" "oci-archive:$tmp:$3" >&2
	mv "$tmp" "$2"
}

# mark IMAGE KEY: remember that buildah's IMAGE was built from inputs KEY.
mark() {
	mkdir -p "$BUILDAH_ROOT/keys"
	echo "$2" >"$BUILDAH_ROOT/keys/${1//[\/:]/_}"
}

# in_store IMAGE KEY: whether buildah's storage holds IMAGE built from KEY.
in_store() {
	have_image "$1" && [[ $(cat "$BUILDAH_ROOT/keys/${1//[\/:]/_}" 2>/dev/null) == "$2" ]]
}

# restore IMAGE ARCHIVE KEY: load IMAGE from its cached archive into buildah storage.
restore() {
	local id
	id=$(bh pull --quiet "oci-archive:$2")
	bh tag "$id" "$1"
	mark "$1" "$3"
}

HOST_ARCH=$(dpkg --print-architecture)

# base_key [ARCH]: the inputs of the base image of ARCH (default the
# machine's, whose key has no architecture in it).
base_key() {
	local mirror arch=${1:-$HOST_ARCH}
	mirror=$(apt_mirror) || die "no apt source for suite $SUITE in /etc/apt/sources.list{,.d/*}"
	if [[ $arch == "$HOST_ARCH" ]]; then
		printf 'base-v2 %s %s\n' "$mirror" "$SUITE" | sha
	else
		printf 'base-v2 %s %s %s\n' "$mirror" "$SUITE" "$arch" | sha
	fi
}

# base_image [ARCH]: the name of ARCH's base image in buildah's storage.
base_image() {
	local arch=${1:-$HOST_ARCH}
	if [[ $arch == "$HOST_ARCH" ]]; then
		echo "$BASE_IMAGE"
	else
		echo "$IMAGE_PREFIX/debian-$arch:$SUITE-slim"
	fi
}

# ensure_emulation ARCH: programs of Debian architecture ARCH run on this
# machine: qemu-user-static registered with binfmt_misc, its interpreter
# opened at registration (flag F) so that it works in a chroot too.
ensure_emulation() {
	local arch=$1 qemu entry=/proc/sys/fs/binfmt_misc conf
	case $arch in
	arm64) qemu=aarch64 ;;
	armhf) qemu=arm ;;
	ppc64el) qemu=ppc64le ;;
	s390x | riscv64) qemu=$arch ;;
	*) die "no emulation known for architecture $arch (arm64, armhf, ppc64el, s390x, riscv64)" ;;
	esac
	conf=/usr/lib/binfmt.d/qemu-$qemu.conf
	if [[ ! -f $conf ]]; then
		log "installing qemu-user-static for $arch"
		{ apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends qemu-user-static; } >&2 ||
			die "apt-get install qemu-user-static failed"
		[[ -f $conf ]] || die "qemu-user-static installed no $conf"
	fi
	if [[ ! -e $entry/register ]]; then
		mount -t binfmt_misc binfmt_misc "$entry" || die "cannot mount binfmt_misc on $entry"
	fi
	if [[ ! -e $entry/qemu-$qemu ]]; then
		cat "$conf" >"$entry/register" || die "registering $conf with binfmt_misc failed"
	fi
	grep -qx enabled "$entry/qemu-$qemu" || echo 1 >"$entry/qemu-$qemu"
	grep -q '^flags:.*F' "$entry/qemu-$qemu" ||
		die "$entry/qemu-$qemu is registered without flag F (fix binary): a chroot cannot find its interpreter; remove it (echo -1 >$entry/qemu-$qemu) to have it registered again"
}

# build_base [ARCH]: the Debian base image of ARCH (default the machine's).
build_base() {
	local arch=${1:-$HOST_ARCH} key archive mirror rootfs ctr mnt start image name=base debootstrap_args=()
	key=$(base_key "$arch")
	image=$(base_image "$arch")
	if [[ $arch != "$HOST_ARCH" ]]; then
		name=base-$arch
		debootstrap_args=(--arch="$arch")
	fi
	archive=$OCI_DIR/$name-$key.tar
	if [[ -f $archive ]]; then
		in_store "$image" "$key" || restore "$image" "$archive" "$key"
		[[ $arch != "$HOST_ARCH" ]] || publish "$name" "$archive"
		log "base image $image cached ($archive)"
		return
	fi
	[[ $arch == "$HOST_ARCH" ]] || ensure_emulation "$arch"
	mirror=$(apt_mirror)
	log "debootstrap $SUITE ($arch) from $mirror"
	start=$(date +%s)
	rootfs=$(mktemp -d "${TMPDIR:-/var/tmp}/mc-rootfs.XXXXXX")
	# shellcheck disable=SC2064 # expand now: rootfs is local.
	trap "rm -rf '$rootfs'" RETURN
	debootstrap --variant=minbase "${debootstrap_args[@]}" "$SUITE" "$rootfs" "$mirror" >"$IMAGE_CACHE_DIR/debootstrap.log" 2>&1 ||
		{ tail -20 "$IMAGE_CACHE_DIR/debootstrap.log" >&2; die "debootstrap failed (log: $IMAGE_CACHE_DIR/debootstrap.log)"; }
	# Slim it like debian:*-slim: no docs, man pages or locales, now or later.
	cat >"$rootfs/etc/dpkg/dpkg.cfg.d/docker-slim" <<-'EOF'
		path-exclude /usr/share/doc/*
		path-include /usr/share/doc/*/copyright
		path-exclude /usr/share/man/*
		path-exclude /usr/share/groff/*
		path-exclude /usr/share/info/*
		path-exclude /usr/share/locale/*
		path-include /usr/share/locale/locale.alias
		path-exclude /usr/share/lintian/*
		path-exclude /usr/share/linda/*
	EOF
	cat >"$rootfs/etc/apt/apt.conf.d/docker-clean" <<-'EOF'
		DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
		APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
		Dir::Cache::pkgcache "";
		Dir::Cache::srcpkgcache "";
		APT::Install-Recommends "false";
	EOF
	find "$rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete 2>/dev/null || true
	rm -rf "$rootfs"/usr/share/{man,info,groff,lintian,linda}/* "$rootfs"/var/cache/apt/*.bin \
		"$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/archives/partial/* \
		"$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log "$rootfs"/var/cache/debconf/*-old
	find "$rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} + 2>/dev/null || true
	: >"$rootfs/etc/hostname"
	: >"$rootfs/etc/resolv.conf"
	ctr=$(bh from --quiet scratch)
	mnt=$(bh mount "$ctr")
	tar -C "$rootfs" -cf - . | tar -C "$mnt" -xpf -
	bh umount "$ctr" >/dev/null
	bh config --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--os linux --arch "$(go_arch "$arch")" --cmd bash "$ctr"
	bh commit --quiet --rm "$ctr" "$image" >/dev/null
	mark "$image" "$key"
	mkdir -p "$OCI_DIR"
	push "$image" "$archive" "$IMAGE_PREFIX/$name:dev"
	# Only the machine's goes to the bed's nodes (images.sh import).
	[[ $arch != "$HOST_ARCH" ]] || publish "$name" "$archive"
	log "built $image in $(($(date +%s) - start)) s"
}

# go_arch ARCH: the OCI (Go) name of Debian architecture ARCH.
go_arch() {
	case $1 in
	armhf) echo arm ;;
	ppc64el) echo ppc64le ;;
	i386) echo 386 ;;
	*) echo "$1" ;;
	esac
}

# multiarch ARCH...: a manifest list of the machine's base image and each
# ARCH's, as $IMAGE_PREFIX/debian:$SUITE-slim (made anew each time).
multiarch() {
	local list=$IMAGE_PREFIX/debian:$SUITE-slim arch
	build_base
	for arch in "$@"; do
		[[ $arch == "$HOST_ARCH" ]] || build_base "$arch"
	done
	if bh manifest exists "$list" 2>/dev/null; then
		bh manifest rm "$list" >/dev/null
	fi
	bh manifest create "$list" >/dev/null
	bh manifest add "$list" "containers-storage:$BASE_IMAGE" >/dev/null
	for arch in "$@"; do
		[[ $arch == "$HOST_ARCH" ]] || bh manifest add "$list" "containers-storage:$(base_image "$arch")" >/dev/null
	done
	log "base image list $list: $HOST_ARCH $*"
	echo "$list"
}

build_golang() {
	local key archive goroot ctr mnt start
	goroot=$(go env GOROOT)
	key=$(printf 'golang-v1 %s %s\n' "$(base_key)" "$(go env GOVERSION)" | sha)
	archive=$OCI_DIR/golang-$key.tar
	if [[ -f $archive ]]; then
		in_store "$GOLANG_IMAGE" "$key" || restore "$GOLANG_IMAGE" "$archive" "$key"
		log "builder image $GOLANG_IMAGE cached ($archive)"
		return
	fi
	start=$(date +%s)
	ctr=$(bh from --quiet --pull=never "$BASE_IMAGE")
	mnt=$(bh mount "$ctr")
	mkdir -p "$mnt/usr/local/go" "$mnt/go/bin" "$mnt/etc/ssl/certs"
	tar -C "$goroot" -cf - . | tar -C "$mnt/usr/local/go" -xf -
	# The host's CA bundle lets `go mod download` reach the module proxy over TLS.
	cp /etc/ssl/certs/ca-certificates.crt "$mnt/etc/ssl/certs/ca-certificates.crt"
	bh umount "$ctr" >/dev/null
	bh config --env GOLANG_VERSION="$(go env GOVERSION)" --env GOPATH=/go --env GOTOOLCHAIN=local \
		--env PATH=/go/bin:/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
		--workingdir /go "$ctr"
	bh commit --quiet --rm "$ctr" "$GOLANG_IMAGE" >/dev/null
	mark "$GOLANG_IMAGE" "$key"
	mkdir -p "$OCI_DIR"
	# Not imported into the cluster; the archive only restores buildah's cache.
	push "$GOLANG_IMAGE" "$archive" "$GOLANG_IMAGE"
	log "built $GOLANG_IMAGE in $(($(date +%s) - start)) s"
}

build_pause() {
	local key archive src ctr mnt bin
	src=$REPO_ROOT/test/images/pause
	key=$(cat "$src"/*.go <(go env GOVERSION) | sha)
	archive=$OCI_DIR/pause-$key.tar
	if [[ ! -f $archive ]]; then
		bin=$(mktemp -d "${TMPDIR:-/var/tmp}/mc-pause.XXXXXX")
		(cd "$REPO_ROOT" && CGO_ENABLED=0 GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w" -o "$bin/pause" ./test/images/pause)
		ctr=$(bh from --quiet scratch)
		mnt=$(bh mount "$ctr")
		install -m 0755 "$bin/pause" "$mnt/pause"
		bh umount "$ctr" >/dev/null
		rm -rf "$bin"
		bh config --entrypoint '["/pause"]' --cmd '' "$ctr"
		bh commit --quiet --rm "$ctr" "$IMAGE_PREFIX/pause:dev" >/dev/null
		mkdir -p "$OCI_DIR"
		push "$IMAGE_PREFIX/pause:dev" "$archive" "$IMAGE_PREFIX/pause:dev"
		log "built $IMAGE_PREFIX/pause:dev"
	else
		log "pause image cached ($archive)"
	fi
	publish pause "$archive"
}

# build_provisioner: the external-provisioner that build-sidecars.sh builds
# from its module, alone on an empty file system (as upstream's image, which
# is distroless): deploy/csi's controllers run it as it is.
build_provisioner() {
	local dir key archive ctr mnt image=$IMAGE_PREFIX/csi-provisioner:dev
	dir=$("$here/build-sidecars.sh")
	[[ -x $dir/csi-provisioner ]] || die "build-sidecars.sh left no csi-provisioner in $dir"
	key=$({ echo provisioner-v1; sha256sum <"$dir/csi-provisioner"; } | sha)
	archive=$OCI_DIR/csi-provisioner-$key.tar
	if [[ ! -f $archive ]]; then
		ctr=$(bh from --quiet scratch)
		mnt=$(bh mount "$ctr")
		install -D -m 0755 "$dir/csi-provisioner" "$mnt/csi-provisioner"
		bh umount "$ctr" >/dev/null
		bh config --entrypoint '["/csi-provisioner"]' --cmd '' --user 65532:65532 "$ctr"
		bh commit --quiet --rm "$ctr" "$image" >/dev/null
		mkdir -p "$OCI_DIR"
		push "$image" "$archive" "$image"
		find "$OCI_DIR" -maxdepth 1 -name "csi-provisioner-*.tar" ! -name "csi-provisioner-$key.tar" -delete
		log "built $image"
	else
		log "image $image cached ($archive)"
	fi
	publish csi-provisioner "$archive"
}

# context_key DOCKERFILE CONTEXT: hash of the Dockerfile, the base images and
# every file of CONTEXT that git does not ignore. For the repository root the
# test/, docs and CI files are left out: they do not go into product images.
context_key() {
	local dockerfile=$1 context=$2 files
	context=$(cd "$context" && pwd)
	if git -C "$context" rev-parse --show-toplevel >/dev/null 2>&1; then
		files=$(git -C "$context" ls-files -co --exclude-standard -- .)
	else
		files=$(cd "$context" && find . -type f -printf '%P\n')
	fi
	if [[ $context == "$REPO_ROOT" ]]; then
		files=$(grep -vE '^(test/|\.ci/|docs/|deploy/)|\.md$' <<<"$files" || true)
	fi
	{
		echo "image-v1 $(base_key) $(go env GOVERSION) $(go env GOPROXY)"
		sha256sum <"$dockerfile" # content only: the key must not depend on where the clone is
		# shellcheck disable=SC2016 # $1 is for sh -c.
		(cd "$context" && sort <<<"$files" | while IFS= read -r f; do [[ -f $f ]] && sha256sum -- "$f"; done)
	} | sha
}

build_image() {
	local name=$1 dockerfile=$2 context=$3 key archive image start
	[[ -f $dockerfile ]] || die "no Dockerfile $dockerfile"
	[[ -d $context ]] || die "no build context $context"
	image=$IMAGE_PREFIX/$name:dev
	key=$(context_key "$dockerfile" "$context")
	archive=$OCI_DIR/$name-$key.tar
	if [[ -f $archive ]]; then
		log "image $image cached ($archive)"
		publish "$name" "$archive"
		return
	fi
	build_base
	build_golang
	log "building $image from $dockerfile (context $context)"
	start=$(date +%s)
	mkdir -p "$OCI_DIR" "$IMAGE_CACHE_DIR/logs"
	# The host's Go module and build caches (those of make unit and verify)
	# serve the builder's go mod download and go build: only the inputs
	# (context_key) decide what is built, the caches only how fast.
	mkdir -p "$(go env GOMODCACHE)" "$(go env GOCACHE)"
	if ! bh bud --pull=never --isolation=chroot --layers \
		--build-arg "GOPROXY=$(go env GOPROXY)" \
		-v "$(go env GOMODCACHE):/go/pkg/mod" -v "$(go env GOCACHE):/root/.cache/go-build" \
		-f "$dockerfile" -t "$image" "$context" >"$IMAGE_CACHE_DIR/logs/$name.log" 2>&1; then
		tail -30 "$IMAGE_CACHE_DIR/logs/$name.log" >&2
		die "building $image failed (log: $IMAGE_CACHE_DIR/logs/$name.log)"
	fi
	push "$image" "$archive" "$image"
	publish "$name" "$archive"
	log "built $image in $(($(date +%s) - start)) s"
	# Keep the caches from growing with every source change: older archives of
	# NAME and images no tag or build cache layer refers to any more.
	find "$OCI_DIR" -maxdepth 1 -name "$name-*.tar" ! -name "$name-$key.tar" -delete
	bh rmi --prune >/dev/null 2>&1 || true
}

# import NAME...: import current archives into the containerd of every node
# of the bed.
import() {
	local env=$BED_DIR/env name f i sockets=()
	[[ -f $env ]] || die "no running bed ($env missing)"
	# shellcheck source=/dev/null
	source "$env"
	sockets=("$CRI_SOCKET")
	for ((i = 2; i <= ${BED_NODES:-1}; i++)); do
		f=NODE_${i}_CRI_SOCKET
		sockets+=("${!f:?$env lacks $f}")
	done
	if (($# == 0)); then
		set --
		for f in "$CURRENT_DIR"/*.tar; do
			[[ -e $f ]] && set -- "$@" "$(basename "$f" .tar)"
		done
	fi
	for name in "$@"; do
		f=$CURRENT_DIR/$name.tar
		[[ -e $f ]] || die "no image archive for $name ($f); run images.sh first"
		for i in "${sockets[@]}"; do
			ctr -a "$i" -n k8s.io images import "$(readlink -f "$f")" >/dev/null ||
				die "importing $f into containerd ($i) failed"
		done
		log "imported $name ($(readlink -f "$f")) into ${#sockets[@]} node(s)"
	done
}

# sizes: the gzip (sum of the compressed layers) and unpacked size of each
# current image.
sizes() {
	local f name tmp gz unpacked layer
	for f in "$CURRENT_DIR"/*.tar; do
		[[ -e $f ]] || continue
		name=$(basename "$f" .tar)
		tmp=$(mktemp -d)
		tar -C "$tmp" -xf "$f"
		gz=0
		unpacked=0
		for layer in $(jq -r '.manifests[0].digest' "$tmp/index.json" | sed 's/^sha256://' |
			xargs -I{} jq -r '.layers[].digest' "$tmp/blobs/sha256/{}" | sed 's/^sha256://'); do
			gz=$((gz + $(stat -c %s "$tmp/blobs/sha256/$layer")))
			unpacked=$((unpacked + $(gzip -dc "$tmp/blobs/sha256/$layer" | wc -c)))
		done
		rm -rf "$tmp"
		awk -v n="$name" -v g="$gz" -v u="$unpacked" \
			'BEGIN { printf "%-18s gzip %7.1f MB  unpacked %7.1f MB\n", n, g / 1e6, u / 1e6 }'
	done
}

# ensure_mountpod_dockerfile: the mount-pod Dockerfile belongs to the product;
# until it exists a minimal stand-in keeps the bed usable.
ensure_mountpod_dockerfile() {
	local df=$REPO_ROOT/images/Dockerfile
	[[ -f $df ]] && return
	log "WARNING: $df does not exist; writing a minimal placeholder"
	mkdir -p "$(dirname "$df")"
	cat >"$df" <<-'EOF'
		# Placeholder mount-pod image written by test/bed/images.sh until the real
		# one lands: tini as PID 1 keeping the container alive.
		FROM debian:bookworm-slim
		RUN apt-get update && apt-get install -y --no-install-recommends tini && rm -rf /var/lib/apt/lists/*
		ENTRYPOINT ["/usr/bin/tini", "--"]
		CMD ["sleep", "infinity"]
	EOF
}

main() {
	mkdir -p "$IMAGE_CACHE_DIR" "$BUILDAH_ROOT"
	case ${1:-all} in
	all)
		build_base
		build_golang
		build_pause
		ensure_mountpod_dockerfile
		build_image mountpod "$REPO_ROOT/images/Dockerfile" "$REPO_ROOT"
		build_image csi-driver "$REPO_ROOT/images/csi-driver/Dockerfile" "$REPO_ROOT"
		# The end-to-end suites' servers and the busybox stand-in of the
		# conformance suite: built here with the others (the tests' own
		# build of them is then a cache hit).
		local name
		for name in glusterfs-server ceph-server e2e-busybox; do
			build_image "$name" "$REPO_ROOT/test/images/$name/Dockerfile" "$REPO_ROOT/test/images/$name"
		done
		;;
	base) build_base "${2:-}" ;;
	multiarch)
		shift
		(($# > 0)) || die "usage: images.sh multiarch ARCH..."
		multiarch "$@"
		;;
	golang) build_golang ;;
	pause) build_pause ;;
	provisioner) build_provisioner ;;
	build)
		(($# == 4)) || die "usage: images.sh build NAME DOCKERFILE CONTEXT"
		build_image "$2" "$3" "$4"
		;;
	import)
		shift
		import "$@"
		;;
	sizes) sizes ;;
	*) die "usage: images.sh [all|base [ARCH]|multiarch ARCH...|golang|pause|provisioner|build NAME DOCKERFILE CONTEXT|import [NAME...]|sizes]" ;;
	esac
}

main "$@"
