//go:build e2e_multiarch

// Package multiarch checks the images of `make images` for more than one
// platform (make e2e-multiarch; root): each name a manifest list of
// linux/amd64 and linux/arm64, each image of its platform, and each
// platform's tools run, arm64's under emulation (qemu-user-static
// registered with binfmt_misc, which test/bed/images.sh sets up). It needs
// no cluster: the images are built in the test bed's buildah storage from
// its base images (the arm64 one bootstrapped under emulation) and run
// with buildah.
package multiarch

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// platforms are what the test builds, and each one's ELF machine and
// `uname -m`.
var platforms = []struct {
	name    string
	machine elf.Machine
	uname   string
	// cephFUSE: Debian builds no ceph-fuse for arm64.
	cephFUSE bool
}{
	{"linux/amd64", elf.EM_X86_64, "x86_64", true},
	{"linux/arm64", elf.EM_AARCH64, "aarch64", false},
}

func TestImages(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("make e2e-multiarch runs as root: it registers qemu-user-static with binfmt_misc and builds in the test bed's buildah storage")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cacheDir := os.Getenv("MC_CACHE_DIR")
	if cacheDir == "" {
		cacheDir = "/var/cache/mountcontainers"
	}
	storage := filepath.Join(cacheDir, "buildah")
	buildah := []string{"buildah", "--root", storage + "/storage", "--runroot", storage + "/run", "--storage-driver", "overlay"}

	// Last: the storage is left as the bed's scripts need it. buildah 1.28
	// cannot list a storage that holds a manifest list of images of its
	// own (what `manifest add containers-storage:` and `build --manifest`
	// make), and the bed's prune of old images then fails.
	t.Cleanup(func() {
		if o, err := exec.Command(buildah[0], append(buildah[1:], "images")...).CombinedOutput(); err != nil {
			t.Errorf("buildah cannot list the bed's storage after the test: %v\n%s", err, o)
		}
	})

	// The builder image and the base images: the machine's and arm64's
	// in one list, which the Dockerfiles' runtime stages resolve by
	// platform.
	start := time.Now()
	run(t, root, nil, 30*time.Minute, "test/bed/images.sh", "golang")
	out := run(t, root, nil, 30*time.Minute, "test/bed/images.sh", "multiarch", "arm64")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	base := lines[len(lines)-1]
	t.Cleanup(func() {
		if o, err := exec.Command(buildah[0], append(buildah[1:], "manifest", "rm", base)...).CombinedOutput(); err != nil {
			t.Errorf("removing the base image list %s: %v\n%s", base, err, o)
		}
	})
	t.Logf("base images ready in %s: %s", time.Since(start).Round(time.Second), base)

	// make images, as a reader runs it, with this machine's storage and
	// bases.
	const registry = "localhost/e2e-multiarch"
	version := strings.TrimSpace(run(t, root, nil, time.Minute, "git", "describe", "--tags", "--always", "--dirty"))
	env := append(os.Environ(),
		"BUILDAH="+strings.Join(buildah, " "),
		"BUILD_ARGS=--pull=never --layers --build-arg BASE_IMAGE="+base+
			" --build-arg GOPROXY="+goEnv(t, "GOPROXY")+
			" -v "+goEnv(t, "GOMODCACHE")+":/go/pkg/mod -v "+goEnv(t, "GOCACHE")+":/root/.cache/go-build")
	names := []string{"mountpod", "csi-driver"}
	t.Cleanup(func() {
		for _, name := range names {
			ref := registry + "/mountcontainers/" + name + ":" + version
			if o, err := exec.Command(buildah[0], append(buildah[1:], "manifest", "rm", ref)...).CombinedOutput(); err != nil {
				t.Logf("removing the image list %s: %v\n%s", ref, err, o)
			}
		}
	})
	start = time.Now()
	run(t, root, env, 60*time.Minute, "make", "images", "REGISTRY="+registry, "PLATFORMS=linux/amd64,linux/arm64")
	t.Logf("make images for both platforms: %s", time.Since(start).Round(time.Second))

	for _, name := range names {
		ref := registry + "/mountcontainers/" + name + ":" + version
		t.Run(name, func(t *testing.T) {
			var list struct {
				Manifests []struct {
					Digest   string `json:"digest"`
					Platform struct {
						OS           string `json:"os"`
						Architecture string `json:"architecture"`
					} `json:"platform"`
				} `json:"manifests"`
			}
			if err := json.Unmarshal([]byte(run(t, root, nil, time.Minute, buildah[0], append(buildah[1:], "manifest", "inspect", ref)...)), &list); err != nil {
				t.Fatalf("buildah manifest inspect %s: %v", ref, err)
			}
			var got []string
			for _, m := range list.Manifests {
				got = append(got, m.Platform.OS+"/"+m.Platform.Architecture)
			}
			slices.Sort(got)
			if want := []string{"linux/amd64", "linux/arm64"}; !slices.Equal(got, want) {
				t.Fatalf("%s lists the platforms %q, want %q", ref, got, want)
			}
			for _, p := range platforms {
				t.Run(p.name, func(t *testing.T) {
					c := newContainer(t, buildah, ref, p.name)
					if c.arch != strings.TrimPrefix(p.name, "linux/") {
						t.Fatalf("the %s image of %s says it is for %s", p.name, ref, c.arch)
					}
					if name == "mountpod" {
						checkMountpod(t, c, p.machine, p.uname, p.cephFUSE, version)
					} else {
						checkCSIDriver(t, c, p.machine, version)
					}
				})
			}
		})
	}
}

// container is a buildah working container of one platform's image.
type container struct {
	buildah []string
	id      string
	arch    string // its image's
	rootfs  string // mounted
}

func newContainer(t *testing.T, buildah []string, ref, platform string) *container {
	t.Helper()
	c := &container{buildah: buildah}
	c.id = strings.TrimSpace(run(t, "", nil, time.Minute, buildah[0], append(buildah[1:], "from", "--quiet", "--pull=never", "--platform", platform, ref)...))
	t.Cleanup(func() {
		_ = exec.Command(buildah[0], append(buildah[1:], "rm", c.id)...).Run()
	})
	var info struct {
		OCIv1 struct {
			Architecture string `json:"architecture"`
		} `json:"OCIv1"`
	}
	if err := json.Unmarshal([]byte(run(t, "", nil, time.Minute, buildah[0], append(buildah[1:], "inspect", "--type", "container", c.id)...)), &info); err != nil {
		t.Fatal(err)
	}
	c.arch = info.OCIv1.Architecture
	c.rootfs = strings.TrimSpace(run(t, "", nil, time.Minute, buildah[0], append(buildah[1:], "mount", c.id)...))
	return c
}

// run runs argv in the container (chroot isolation) and
// returns its output; a failure fails the test.
func (c *container) run(t *testing.T, env []string, argv ...string) string {
	t.Helper()
	args := append(slices.Clone(c.buildah[1:]), "run", "--isolation", "chroot")
	for _, e := range env {
		args = append(args, "--env", e)
	}
	args = append(args, c.id, "--")
	return run(t, "", nil, 10*time.Minute, c.buildah[0], append(args, argv...)...)
}

// machineOf returns the ELF machine of the file at path in the
// container's file system, following its links there; ok is false for a
// script.
func (c *container) machineOf(t *testing.T, path string) (m elf.Machine, ok bool) {
	t.Helper()
	real := strings.TrimSpace(c.run(t, nil, "readlink", "-f", path))
	f, err := os.Open(filepath.Join(c.rootfs, real))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	head := make([]byte, 2)
	if _, err := f.ReadAt(head, 0); err != nil {
		t.Fatalf("%s (%s): %v", path, real, err)
	}
	if string(head) == "#!" {
		return 0, false
	}
	e, err := elf.NewFile(f)
	if err != nil {
		t.Fatalf("%s (%s) is neither a script nor ELF: %v", path, real, err)
	}
	return e.Machine, true
}

func checkMountpod(t *testing.T, c *container, machine elf.Machine, uname string, cephFUSE bool, version string) {
	// Emulation, not the machine's processor, when the platforms differ.
	if got := strings.TrimSpace(c.run(t, nil, "uname", "-m")); got != uname {
		t.Fatalf("uname -m in the image = %q, want %q", got, uname)
	}

	// Every tool the image requires is there, of the image's platform,
	// and so are the programs of the build stage.
	var required string
	for _, e := range strings.Split(c.run(t, nil, "env"), "\n") {
		if v, ok := strings.CutPrefix(e, "MOUNTPOD_REQUIRE_TOOLS="); ok {
			required = v
		}
	}
	if required == "" {
		t.Fatal("the image sets no MOUNTPOD_REQUIRE_TOOLS")
	}
	tools := append(strings.Split(required, ","), "tini", "glusterfs",
		"/usr/local/bin/mountpod", "/usr/local/bin/mount-scope", "/usr/local/bin/kubelet-exec-shim",
		"/usr/local/bin/kubelet-exec-shim-cri", "/usr/local/bin/flexvolume-driver")
	checked, scripts := 0, 0
	for _, tool := range tools {
		if !cephFUSE && (tool == "ceph-fuse" || tool == "mount.fuse.ceph") {
			if o, err := exec.Command(c.buildah[0], append(slices.Clone(c.buildah[1:]), "run", "--isolation", "chroot", c.id, "--", "sh", "-c", "command -v "+tool)...).CombinedOutput(); err == nil {
				t.Errorf("%s is in the image (%s), which Debian does not build for this platform: update the test and the docs", tool, bytes.TrimSpace(o))
			}
			continue
		}
		path := tool
		if !strings.Contains(tool, "/") {
			path = strings.TrimSpace(c.run(t, nil, "sh", "-c", "command -v "+tool))
		}
		m, ok := c.machineOf(t, path)
		checked++
		switch {
		case !ok:
			scripts++
		case m != machine:
			t.Errorf("%s (%s) is for %s, want %s", tool, path, m, machine)
		}
	}
	t.Logf("%d programs checked, %d of them scripts", checked, scripts)

	// They run: file systems made and checked on image files, the clients
	// print their versions, the mount pod's binaries theirs.
	out := c.run(t, nil, "sh", "-ec", `
		truncate -s 32M /tmp/ext4.img && mkfs.ext4 -q -F /tmp/ext4.img && fsck.ext4 -fn /tmp/ext4.img >/dev/null
		echo "ext4: $(blkid -o value -s TYPE /tmp/ext4.img)"
		truncate -s 320M /tmp/xfs.img && mkfs.xfs -q /tmp/xfs.img && xfs_repair -n /tmp/xfs.img 2>/dev/null
		echo "xfs: $(blkid -o value -s TYPE /tmp/xfs.img)"
		rm -f /tmp/ext4.img /tmp/xfs.img
		rbd --version
		glusterfs --version | head -1
		if command -v ceph-fuse >/dev/null; then ceph-fuse --version; fi
		mount --version; findmnt --version; modprobe --version; tini --version
		mountpod --version; kubelet-exec-shim --version; flexvolume-driver init
	`)
	t.Logf("the tools in the image:\n%s", out)
	for _, want := range []string{"ext4: ext4\n", "xfs: xfs\n", "ceph version 16.", "glusterfs 10.", "mount from util-linux", "tini version", version, `"status":"Success"`} {
		if !strings.Contains(out, want) {
			t.Errorf("the tools' output lacks %q", want)
		}
	}
	// rbd's and ceph-fuse's versions read alike.
	if got, want := strings.Count(out, "ceph version 16."), map[bool]int{true: 2, false: 1}[cephFUSE]; got != want {
		t.Errorf("%d Ceph clients printed their versions, want %d (rbd, and ceph-fuse where Debian builds it)", got, want)
	}

	// The readiness check, per plugin: the tools pass, so it stops at the
	// registrations, none written here; without ceph-fuse a cephfs mount
	// pod names what it lacks.
	pod := []string{"MOUNTPOD_POD_NAMESPACE=kube-system", "MOUNTPOD_POD_NAME=mount-abcde",
		"MOUNTPOD_POD_UID=3f1c1a0e-0000-4000-8000-000000000001", "MOUNTPOD_CONTAINER_NAME=mount",
		"MOUNTPOD_REGISTRATION_DIR=/tmp/registrations"}
	for _, plugin := range []string{"kubernetes.io/glusterfs", "kubernetes.io/rbd", "kubernetes.io/cephfs"} {
		out := check(t, c, append(pod, "MOUNTPOD_PLUGINS="+plugin))
		missing := strings.Contains(out, "missing required tools")
		wantMissing := plugin == "kubernetes.io/cephfs" && !cephFUSE
		switch {
		case !strings.Contains(out, "plugin "+plugin+": not registered"):
			t.Errorf("mountpod check for %s did not reach the registrations:\n%s", plugin, out)
		case missing != wantMissing:
			t.Errorf("mountpod check for %s: missing tools %t, want %t:\n%s", plugin, missing, wantMissing, out)
		case wantMissing && !strings.Contains(out, "missing required tools: ceph-fuse, mount.fuse.ceph ("):
			t.Errorf("mountpod check for %s does not name ceph-fuse and mount.fuse.ceph:\n%s", plugin, out)
		}
		t.Logf("mountpod check, %s:\n%s", plugin, out)
	}
}

// check runs `mountpod check` in c, which exits 1 (not ready), and
// returns what it printed.
func check(t *testing.T, c *container, env []string) string {
	t.Helper()
	args := append(slices.Clone(c.buildah[1:]), "run", "--isolation", "chroot")
	for _, e := range env {
		args = append(args, "--env", e)
	}
	args = append(args, c.id, "--", "sh", "-c", "mkdir -p /tmp/registrations && chmod 700 /tmp/registrations && exec mountpod check")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, c.buildah[0], args...).CombinedOutput()
	if err == nil {
		t.Fatalf("mountpod check passed without registrations:\n%s", out)
	}
	return string(out)
}

func checkCSIDriver(t *testing.T, c *container, machine elf.Machine, version string) {
	f, err := elf.Open(filepath.Join(c.rootfs, "usr/local/bin/csi-driver"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Machine != machine {
		t.Errorf("csi-driver is for %s, want %s", f.Machine, machine)
	}
	if out := c.run(t, nil, "/usr/local/bin/csi-driver", "--version"); !strings.Contains(out, version) {
		t.Errorf("csi-driver --version = %q, want %s in it", out, version)
	}
}

// run runs name with args in dir (the current one if empty) and returns
// its output; a failure or timeout fails the test with the output.
func run(t *testing.T, dir string, env []string, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v\n%s\n%s", name, strings.Join(args, " "), err, tail(stdout.String(), 40), tail(stderr.String(), 40))
	}
	return stdout.String()
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	return strings.TrimSpace(run(t, "", nil, time.Minute, "go", "env", name))
}

// tail returns the last n lines of s.
func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("[%d lines before]", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
