//go:build e2e && e2e_quickstart

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mcexec "github.com/mountcontainers/mountcontainers/pkg/exec"
	"github.com/mountcontainers/mountcontainers/test/framework"
)

// docBlock is one ```sh block of a document, under its section.
type docBlock struct {
	section, text string
}

// shBlocks returns the ```sh blocks of the Markdown file path, in order.
func shBlocks(t *testing.T, path string) []docBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []docBlock
	var section string
	var cur *strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case cur != nil && line == "```":
			blocks = append(blocks, docBlock{section, cur.String()})
			cur = nil
		case cur != nil:
			cur.WriteString(line + "\n")
		case line == "```sh":
			cur = &strings.Builder{}
		case strings.HasPrefix(line, "## "):
			section = strings.TrimPrefix(line, "## ")
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if cur != nil {
		t.Fatalf("%s: a ```sh block is not closed", path)
	}
	return blocks
}

// TestQuickstart runs docs/quickstart.md as a new user would, each of its
// commands as written, against the bed: the images built from this
// checkout and pushed to a registry (the bed's stand-in, crane's, which
// the node's containerd pulls from, as it does docker.io's and
// registry.k8s.io's images: the busybox and the external-provisioner the
// bed has built), the chart installed with them pinned by digest, and a
// pod that writes to a claim of the StorageClass the chart made, staged
// through the mount pod's exec socket (the default exec mode's path, read
// from the node plugin's log). The writer's lines are read on the
// GlusterFS brick; the CephFS claim (section 5, the bed's Ceph) is a
// subvolume of its file system. The quickstart's removal leaves no claim,
// volume, subvolume or release, and nothing of the mount pods and the CSI
// drivers on the node (the node's uninstall). The bed's one change is its node's
// paths: the helm on the commands' PATH adds test/demo/manifests.sh's
// post-renderer to their helm install.
func TestQuickstart(t *testing.T) {
	bed := framework.Current(t)
	ctx := context.Background()
	root, err := framework.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	g := setupGlusterfs(t, bed)
	// The quickstart installs the mount pod: the suite's goes first.
	bed.DeleteKustomize(t, filepath.Join(g.out, "mountpod"), 3*time.Minute)
	csiImages(t, root)
	run(t, 2*time.Minute, filepath.Join(root, "test/bed/images.sh"), "build", "e2e-busybox",
		filepath.Join(root, "test/images/e2e-busybox/Dockerfile"), filepath.Join(root, "test/images/e2e-busybox"))

	// The registry stand-in, on a free port of the loopback.
	tool := func(name string) string {
		return strings.TrimSpace(run(t, 10*time.Minute, filepath.Join(root, "test/tools/tool.sh"), name))
	}
	crane, helm := tool("crane"), tool("helm")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	registryHost := l.Addr().String()
	l.Close()
	srv := exec.Command(crane, "registry", "serve", "--address", registryHost)
	srv.Stdout, srv.Stderr = os.Stderr, os.Stderr
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Process.Kill(); _ = srv.Wait() })
	if err := framework.Poll(ctx, "the registry stand-in at "+registryHost, 100*time.Millisecond, 30*time.Second,
		func(context.Context) (bool, string, error) {
			c, err := net.Dial("tcp", registryHost)
			if err == nil {
				c.Close()
			}
			return err == nil, fmt.Sprint(err), nil
		}); err != nil {
		t.Fatal(err)
	}
	// The node's containerd pulls from it: as itself, and as the mirror
	// of docker.io and registry.k8s.io.
	certs := filepath.Join(filepath.Dir(strings.TrimPrefix(bed.Env.CRIEndpoint, "unix://")), "certs.d")
	for host, server := range map[string]string{registryHost: "http://" + registryHost, "docker.io": "https://registry-1.docker.io", "registry.k8s.io": "https://registry.k8s.io"} {
		dir := filepath.Join(certs, host)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		hosts := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", server, "http://"+registryHost)
		if err := os.WriteFile(filepath.Join(dir, "hosts.toml"), []byte(hosts), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	// test/bed/lib.sh's cache: the image archives and buildah's storage.
	cacheDir := os.Getenv("MC_CACHE_DIR")
	if cacheDir == "" {
		cacheDir = "/var/cache/mountcontainers"
	}
	// The upstream images the quickstart's pods name, the bed's builds.
	for name, ref := range map[string]string{"e2e-busybox": "library/busybox:1.36", "csi-provisioner": "sig-storage/csi-provisioner:v6.4.0"} {
		layout := t.TempDir()
		archive := filepath.Join(cacheDir, "images/current", name+".tar")
		run(t, 2*time.Minute, "tar", "-xf", archive, "-C", layout)
		run(t, 2*time.Minute, crane, "push", "--insecure", layout, registryHost+"/"+ref)
	}

	// The commands' environment: the reader's settings, the bed's
	// kubectl and kubeconfig, a helm that adds the bed's post-renderer to
	// an install, and how this machine builds and pushes images (its
	// buildah storage holds the base images; the stand-in speaks HTTP).
	out := t.TempDir()
	cmd := exec.Command(filepath.Join(root, "test/demo/manifests.sh"), out)
	cmd.Env = append(os.Environ(), "GLUSTER_NAMESPACE="+g.ns, "BED_DIR="+bed.Env.BedDir)
	if o, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("manifests.sh: %v\n%s", err, o)
	}
	bin := t.TempDir()
	wrapper := fmt.Sprintf(`#!/bin/sh
# The bed's helm: docs/quickstart.md's install and uninstall, with the bed's paths.
if [ "$1" = install ] || [ "$1" = upgrade ]; then
	exec %q "$@" --post-renderer %q --post-renderer-args %q --post-renderer-args %q
fi
exec %q "$@"
`, helm, filepath.Join(root, "test/demo/helm-post-render.sh"), filepath.Join(out, "helm-quickstart"), bed.Env.Kubectl, helm)
	if err := os.WriteFile(filepath.Join(bin, "helm"), []byte(wrapper), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bed.Env.Kubectl, filepath.Join(bin, "kubectl")); err != nil {
		t.Fatal(err)
	}
	gomod, gocache := strings.TrimSpace(run(t, time.Minute, "go", "env", "GOMODCACHE")), strings.TrimSpace(run(t, time.Minute, "go", "env", "GOCACHE"))
	goproxy := strings.TrimSpace(run(t, time.Minute, "go", "env", "GOPROXY"))
	buildah := filepath.Join(cacheDir, "buildah")
	registry := registryHost + "/storage"
	env := append(os.Environ(),
		"PATH="+bin+":"+os.Getenv("PATH"), "KUBECONFIG="+bed.Env.Kubeconfig,
		"HOME="+t.TempDir(), // helm's configuration: none of the machine's
		"GOMODCACHE="+gomod, "GOCACHE="+gocache,
		"BUILDAH=buildah --root "+buildah+"/storage --runroot "+buildah+"/run --storage-driver overlay",
		"BUILD_ARGS=--pull=never --layers --build-arg GOPROXY="+goproxy+" -v "+gomod+":/go/pkg/mod -v "+gocache+":/root/.cache/go-build",
		"PUSH_ARGS=--tls-verify=false",
	)
	// make images leaves a manifest list of each image in the bed's
	// buildah storage: removed here, or images.sh's prune would later take
	// their images from under them (and buildah then fails to list its
	// storage at all).
	version := strings.TrimSpace(run(t, time.Minute, "git", "-C", root, "describe", "--tags", "--always", "--dirty"))
	t.Cleanup(func() {
		for _, name := range []string{"mountpod", "csi-driver"} {
			ref := registry + "/mountcontainers/" + name + ":" + version
			c := exec.Command("buildah", "--root", buildah+"/storage", "--runroot", buildah+"/run", "--storage-driver", "overlay", "manifest", "rm", ref)
			if o, err := c.CombinedOutput(); err != nil {
				t.Logf("removing the image list %s: %v\n%s", ref, err, o)
			}
		}
	})
	settings := map[string]string{"REGISTRY": registry, "GLUSTER_SERVER": bed.Env.NodeName, "GLUSTER_VOLUME": glusterVolume}
	// CephFS (section 5): the bed's Ceph, its keys in files as an
	// administrator hands them over, and the cephfs mount pod's bed paths.
	ceph := quickstartCeph(t, bed, root, filepath.Join(out, "helm-quickstart", "kustomization.yaml"))
	for k, v := range ceph.settings {
		settings[k] = v
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
		defer cancel()
		_ = bed.RunKubectl(ctx, "", "delete", "--ignore-not-found", "--wait", "--timeout=2m", "-f", filepath.Join(root, "docs/quickstart/writer.yaml")).Err
		c := exec.CommandContext(ctx, helm, "uninstall", "mountcontainers", "--namespace", mountpodNS, "--ignore-not-found", "--wait")
		c.Env = env
		_ = c.Run()
	})

	blocks := shBlocks(t, filepath.Join(root, "docs/quickstart.md"))
	ran := map[string]bool{}
	runBlock := func(b docBlock) string {
		t.Helper()
		start := time.Now()
		ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
		defer cancel()
		c := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.text)
		c.Dir = root
		c.Env = env
		for k, v := range settings {
			c.Env = append(c.Env, k+"="+v)
		}
		o, err := c.CombinedOutput()
		if err != nil {
			if strings.Contains(b.text, "mountcontainers-uninstall") {
				// What the node's uninstall said (it names what is in use).
				o = append(o, "\nthe uninstall's log:\n"...)
				o = append(o, bed.RunKubectl(context.Background(), "", "-n", mountpodNS, "logs", "-l", "app.kubernetes.io/name=mountcontainers-uninstall", "-c", "uninstall", "--tail=50").Stdout...)
			}
			t.Fatalf("docs/quickstart.md, %q:\n%s\nfailed: %v\n%s", b.section, b.text, err, o)
		}
		t.Logf("docs/quickstart.md, %q (%s):\n%s%s", b.section, time.Since(start).Round(time.Millisecond), b.text, o)
		ran[b.section] = true
		return string(o)
	}
	var removal []docBlock
	outputs := map[string]string{}
	for _, b := range blocks {
		switch {
		case strings.HasPrefix(b.text, "# Your settings:\n"):
			// The bed's, in the environment above; the block must set
			// exactly those.
			for k := range settings {
				if !strings.Contains(b.text, "export "+k+"=") {
					t.Fatalf("docs/quickstart.md's settings no longer set %s:\n%s", k, b.text)
				}
			}
			if n := strings.Count(b.text, "export "); n != len(settings) {
				t.Fatalf("docs/quickstart.md's settings set %d variables, the test %d:\n%s", n, len(settings), b.text)
			}
		case b.section == "Remove it":
			removal = append(removal, b)
		default:
			outputs[b.section] = runBlock(b)
		}
	}
	for _, s := range []string{"1. Build and push the images", "2. Install", "3. Check the install", "4. A first volume", "5. A CephFS volume"} {
		if !ran[s] {
			t.Fatalf("docs/quickstart.md has no commands under %q any more: the test follows its sections", s)
		}
	}

	// The section's last command printed the writer's last line; the
	// brick holds the lines: the volume is the GlusterFS one.
	lines := strings.Split(strings.TrimSpace(outputs["4. A first volume"]), "\n")
	last := strings.TrimSpace(lines[len(lines)-1])
	if last == "" || strings.Contains(last, "quickstart") {
		t.Fatalf("the block's output ends in %q, not a line of the writer's", last)
	}
	pvc, err := bed.Client.CoreV1().PersistentVolumeClaims("default").Get(ctx, "quickstart", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pv, err := bed.Client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil || pv.Spec.CSI == nil || pv.Spec.CSI.Driver != "glusterfs.mountcontainers.io" {
		t.Fatalf("the claim's volume %s: %v, %+v; want one of glusterfs.mountcontainers.io", pvc.Spec.VolumeName, err, pv)
	}
	brickDir := g.brick + "/" + pv.Spec.CSI.VolumeAttributes["subdir"]
	onBrick := bed.MustExec(t, g.ns, "glusterfs-server", "server", "cat", brickDir+"/hello")
	if !strings.Contains(onBrick, last+"\n") {
		t.Errorf("the brick's %s/hello lacks the line the pod printed (%q):\n%s", brickDir, last, onBrick)
	}
	// Every pod of the release runs the image pushed, pinned by digest.
	for _, sel := range []string{"app.kubernetes.io/instance=glusterfs-mountpod", "app.kubernetes.io/instance=csi-glusterfs-node"} {
		pods := bed.WaitPodsBySelector(t, mountpodNS, sel, 1, true, time.Minute)
		for _, c := range pods[0].Spec.Containers {
			if c.Name == "csi-provisioner" {
				continue
			}
			if !strings.HasPrefix(c.Image, registry+"/mountcontainers/") || !strings.Contains(c.Image, "@sha256:") {
				t.Errorf("pod %s, container %s runs %s; want an image of %s pinned by digest", pods[0].Name, c.Name, c.Image, registry)
			}
		}
	}
	t.Logf("the claim's lines are on the brick (%d bytes in %s/hello)", len(onBrick), brickDir)
	// The path the claim was staged through: the chart's default exec
	// mode, auto, takes the mount pod's exec socket when it answers, as a
	// live mount pod's does; CRI ExecSync is the fallback, not taken here.
	node := bed.WaitPodsBySelector(t, mountpodNS, "app.kubernetes.io/instance=csi-glusterfs-node", 1, true, time.Minute)[0]
	nodeLog := []byte(bed.Kubectl(t, "-n", mountpodNS, "logs", node.Name))
	// recordsVia fails the test for a staging mount through another path.
	if n := recordsVia(t, "node plugin "+node.Name, nodeLog, "staged", mcexec.ViaSocket); n != 1 {
		t.Errorf("the node plugin's log shows %d staging mounts; want the claim's one, via %s (auto, a live mount pod)", n, mcexec.ViaSocket)
	}

	// CephFS: the claim is a subvolume of the bed's Ceph, staged through
	// the cephfs mount pod's exec socket.
	cephPV := ceph.check(t, bed, outputs["5. A CephFS volume"], registry)

	// The quickstart's removal leaves no claim, volume or release, and
	// nothing of the mount pods and the CSI drivers on the node.
	nodeAll, _ := nodeFiles(t, bed, "glusterfs", "cephfs")
	for _, b := range removal {
		runBlock(b)
	}
	checkNodeClean(t, nodeAll)
	if !ran["Remove it"] {
		t.Fatal("docs/quickstart.md has no commands under \"Remove it\" any more")
	}
	bed.WaitPodGone(t, "default", "quickstart-writer", "", time.Minute)
	if err := framework.Poll(ctx, "the claim's volume and directory gone", time.Second, 2*time.Minute,
		func(ctx context.Context) (bool, string, error) {
			if _, err := bed.Client.CoreV1().PersistentVolumes().Get(ctx, pv.Name, metav1.GetOptions{}); err == nil {
				return false, "PersistentVolume " + pv.Name + " still there", nil
			}
			_, _, err := bed.Exec(ctx, 20*time.Second, g.ns, "glusterfs-server", "server", "test", "-e", brickDir)
			return err != nil, brickDir + " still on the brick", nil
		}); err != nil {
		t.Error(err)
	}
	ceph.checkRemoved(t, bed, cephPV)
	if left := strings.TrimSpace(bed.Kubectl(t, "-n", mountpodNS, "get", "daemonsets,deployments", "-l", "app.kubernetes.io/managed-by=Helm", "-o", "name")); left != "" {
		t.Errorf("helm uninstall left %s", left)
	}
}
