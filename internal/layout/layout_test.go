// Package layout holds the tree to its rooms: which process a package runs
// in decides what it may link. The rules are read from `go list`, so a
// new import that breaks one fails here with the chain of imports that
// reaches the forbidden package.
package layout

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mountcontainers/mountcontainers/"

// pkg is what `go list -json` says of a package.
type pkg struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Imports    []string
	Standard   bool
}

// graph lists every package the module's packages reach, tests excluded.
func graph(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json=ImportPath,Dir,GoFiles,Imports,Standard", module+"...")
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	g := map[string]pkg{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var p pkg
		if err := dec.Decode(&p); err != nil {
			t.Fatal(err)
		}
		g[p.ImportPath] = p
		if strings.HasPrefix(p.ImportPath, module) {
			// Seen by go test's cache, which does not see what go list
			// read: a changed import runs the test again.
			for _, f := range p.GoFiles {
				_, _ = os.Stat(filepath.Join(p.Dir, f))
			}
		}
	}
	return g
}

// chain returns the imports that lead from root to a package forbidden
// reports, or nil when root reaches none.
func chain(g map[string]pkg, root string, forbidden func(string) bool) []string {
	from := map[string]string{root: ""}
	queue := []string{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		if p != root && forbidden(p) {
			var path []string
			for ; p != ""; p = from[p] {
				path = append(path, p)
			}
			slices.Reverse(path)
			return path
		}
		for _, imp := range g[p].Imports {
			if _, seen := from[imp]; !seen {
				from[imp] = p
				queue = append(queue, imp)
			}
		}
	}
	return nil
}

func under(prefixes ...string) func(string) bool {
	return func(p string) bool {
		for _, prefix := range prefixes {
			if p == prefix || strings.HasPrefix(p, prefix+"/") {
				return true
			}
		}
		return false
	}
}

func either(fs ...func(string) bool) func(string) bool {
	return func(p string) bool {
		return slices.ContainsFunc(fs, func(f func(string) bool) bool { return f(p) })
	}
}

var (
	godbus  = under("github.com/godbus/dbus", "github.com/coreos/go-systemd")
	grpc    = under("google.golang.org/grpc")
	node    = under(module + "internal/node")
	pod     = under(module + "internal/pod")
	offNode = under(module + "internal/offnode")
	public  = under(module + "pkg")
)

// rule: the packages roots selects reach nothing forbidden selects.
type rule struct {
	name      string
	roots     func(string) bool
	forbidden func(string) bool
}

var rules = []rule{
	{"the public library, which volume hosts link, links neither D-Bus nor a process's own packages",
		public, either(godbus, node, pod, offNode)},
	{"the node's binaries, started by the kubelet for each call, link neither D-Bus nor the mount pod's or the rollout's packages",
		under(module+"cmd/flexvolume-driver", module+"cmd/kubelet-exec-shim", module+"cmd/kubelet-exec-shim-cri"), either(godbus, pod, offNode)},
	{"the CSI driver, a volume host on the node, links neither D-Bus nor the mount pod's or the rollout's packages",
		under(module + "cmd/csi-driver"), either(godbus, pod, offNode)},
	{"the node side does not link the mount pod's side or the rollout's",
		node, either(pod, offNode)},
	{"the shim speaks to the exec socket without gRPC",
		func(p string) bool { return p == module+"cmd/kubelet-exec-shim" || p == module+"internal/node/shim" }, grpc},
	{"the rollout, which runs off the node, links neither the library nor the node's or the mount pod's packages",
		either(offNode, under(module+"cmd/mountpod-rollout")), either(public, node, pod)},
	{"what every process shares links no process's own packages",
		under(module + "internal/shared"), either(node, pod, offNode)},
	{"what crosses the pod boundary links no process's own packages, nor the library",
		under(module + "internal/boundary"), either(node, pod, offNode, public)},
}

func TestLayout(t *testing.T) {
	g := graph(t)
	for _, r := range rules {
		n := 0
		for root := range g {
			if !r.roots(root) {
				continue
			}
			n++
			if c := chain(g, root, r.forbidden); c != nil {
				t.Errorf("%s: %s reaches %s:\n\t%s", r.name, root, c[len(c)-1], strings.Join(c, "\n\t-> "))
			}
		}
		if n == 0 {
			t.Errorf("%s: no package to hold to it (moved?)", r.name)
		}
	}
}

// TestBoundaryIsALeaf: the names both sides of the pod boundary share link
// the standard library only (the exec socket's rules also golang.org/x/sys,
// for the peer's credentials), so every binary can link them cheaply.
func TestBoundaryIsALeaf(t *testing.T) {
	g := graph(t)
	allowed := map[string]func(string) bool{
		module + "internal/boundary":            nil,
		module + "internal/boundary/livestatus": nil,
		module + "internal/boundary/execsocket": under("golang.org/x/sys"),
	}
	for p, extra := range allowed {
		if _, ok := g[p]; !ok {
			t.Errorf("%s: not in the tree (moved?)", p)
			continue
		}
		// "C" is cgo, which package net may use.
		c := chain(g, p, func(q string) bool { return !g[q].Standard && q != "C" && (extra == nil || !extra(q)) })
		if c != nil {
			t.Errorf("%s links %s, which is not the standard library:\n\t%s", p, c[len(c)-1], strings.Join(c, "\n\t-> "))
		}
	}
}

// TestHelperTranslationIsALeaf: the translation of mount.fuse.ceph's
// arguments, which the scope helper (cmd/mount-scope) runs for every FUSE
// mount, links the standard library and internal/boundary only, so that
// the helper stays small however much the CephFS option checks beside it
// link.
func TestHelperTranslationIsALeaf(t *testing.T) {
	g := graph(t)
	p := module + "internal/shared/fs/cephfs/fuseargs"
	if _, ok := g[p]; !ok {
		t.Fatalf("%s: not in the tree (moved?)", p)
	}
	if c := chain(g, p, func(q string) bool { return !g[q].Standard && q != module+"internal/boundary" }); c != nil {
		t.Errorf("%s links %s, which is not the standard library:\n\t%s", p, c[len(c)-1], strings.Join(c, "\n\t-> "))
	}
}

func Example_rule() {
	fmt.Println(under("a/b")("a/b/c"), under("a/b")("a/bc"))
	// Output: true false
}
