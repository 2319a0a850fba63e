package deploy_test

import (
	"bytes"
	stdjson "encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/yaml"
)

// The chart beside the overlays: charts/mountcontainers renders, with its
// defaults, the objects these overlays render together.
var chartOverlays = []string{"glusterfs", "cephfs", "csi/glusterfs", "csi/cephfs"}

const (
	chartDir = "../charts/mountcontainers"
	// The overlays' stand-in for the Ceph monitors, which the chart
	// requires instead.
	cephPlaceholder = "<the Ceph monitors: see deploy/README.md>"
)

// helmBinary returns the helm that test/tools/tool.sh helm built ($HELM; `make
// unit` and `make chart` set it). Without it the chart's tests are skipped
// on a developer's machine and fail in CI, where a skip would hide them.
func helmBinary(t *testing.T) string {
	t.Helper()
	h := os.Getenv("HELM")
	if h == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("HELM is not set: run the unit tests through `make unit` (it builds helm with test/tools/tool.sh helm)")
		}
		t.Skip("HELM is not set: `make unit` or `make chart` builds helm and sets it")
	}
	return h
}

// helm runs the helm binary and returns its standard output; a failure
// returns its standard error in the error.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(helmBinary(t), args...)
	// No repositories, plugins or registries of the user's.
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+home, "HELM_CONFIG_HOME="+home, "HELM_DATA_HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// helmTemplate renders the chart as `helm template` does, in the namespace
// mountcontainers, with the given --set values.
func helmTemplate(t *testing.T, set ...string) (map[string]map[string]any, error) {
	t.Helper()
	args := []string{"template", "mc", chartDir, "--namespace", "mountcontainers"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		return nil, err
	}
	return decodeObjects(t, "helm template", out), nil
}

// decodeObjects decodes a stream of YAML documents strictly into the
// Kubernetes API types (an unknown or duplicate field fails) and returns
// them as JSON objects keyed by kind/namespace/name.
func decodeObjects(t *testing.T, what string, stream []byte) map[string]map[string]any {
	t.Helper()
	ser := json.NewSerializerWithOptions(json.DefaultMetaFactory, scheme.Scheme, scheme.Scheme,
		json.SerializerOptions{Yaml: true, Strict: true})
	objs := map[string]map[string]any{}
	for _, doc := range bytes.Split(stream, []byte("\n---")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s: %v\n%s", what, err, doc)
		}
		if m == nil {
			continue // a comment or an empty document
		}
		kind, _ := m["kind"].(string)
		meta, _ := m["metadata"].(map[string]any)
		ns, _ := meta["namespace"].(string)
		name, _ := meta["name"].(string)
		key := kind + "/" + ns + "/" + name
		if kind != "PodMonitor" { // not in client-go's scheme
			if _, _, err := ser.Decode(doc, nil, nil); err != nil {
				t.Fatalf("%s: strict decode of %s: %v", what, key, err)
			}
		}
		if _, dup := objs[key]; dup {
			t.Fatalf("%s: %s twice", what, key)
		}
		objs[key] = m
	}
	return objs
}

// overlayObjects renders the overlays as JSON objects keyed like
// decodeObjects', with the label that names the tool that applied them as
// Helm would set it.
func overlayObjects(t *testing.T, dirs ...string) map[string]map[string]any {
	t.Helper()
	var stream bytes.Buffer
	for _, dir := range dirs {
		for _, res := range renderResources(t, dir) {
			y, err := res.AsYAML()
			if err != nil {
				t.Fatal(err)
			}
			y = bytes.ReplaceAll(y, []byte("app.kubernetes.io/managed-by: kustomize"), []byte("app.kubernetes.io/managed-by: Helm"))
			stream.WriteString("\n---\n")
			stream.Write(y)
		}
	}
	return decodeObjects(t, "kustomize build", stream.Bytes())
}

// TestChartLint: helm lint --strict passes with the values an install
// needs, and values.schema.json refuses a value of the wrong kind or a
// misspelt one, naming it.
func TestChartLint(t *testing.T) {
	if _, err := helm(t, "lint", "--strict", chartDir, "--set", "plugins.cephfs.allowedServers=10.0.0.1"); err != nil {
		t.Error(err)
	}
	for _, bad := range []struct{ set, names string }{
		{"scopes.pidsLimit=many", "pidsLimit"},
		{"images.mountpod.digest=latest", "digest"},
		{"plugins.glusterfs.allowedServer=10.0.0.1", "allowedServer"},
	} {
		_, err := helm(t, "lint", "--strict", chartDir, "--set", "plugins.cephfs.allowedServers=10.0.0.1", "--set", bad.set)
		if err == nil || !strings.Contains(err.Error(), bad.names) {
			t.Errorf("helm lint --set %s: %v, want a failure naming %s", bad.set, err, bad.names)
		}
	}
}

// TestChartMatchesOverlays: helm template with the defaults renders every
// object of the overlays, equal field by field (list order included), and
// nothing else.
func TestChartMatchesOverlays(t *testing.T) {
	var dirs []string
	for _, o := range chartOverlays {
		dirs = append(dirs, filepath.FromSlash(o))
	}
	want := overlayObjects(t, dirs...)
	got, err := helmTemplate(t, "plugins.cephfs.allowedServers="+cephPlaceholder)
	if err != nil {
		t.Fatal(err)
	}
	if len(want) < 20 {
		t.Fatalf("the overlays rendered %d objects; expected the four overlays' objects", len(want))
	}
	sameObjects(t, want, got)
}

// TestChartUninstall: with uninstall=true the chart renders deploy/uninstall's
// DaemonSet and nothing else (no plugin's objects, so no Ceph monitors
// needed), its Flexvolume directory the chart's.
func TestChartUninstall(t *testing.T) {
	want := overlayObjects(t, "uninstall")
	if len(want) != 1 {
		t.Fatalf("deploy/uninstall rendered %d objects; want its DaemonSet", len(want))
	}
	got, err := helmTemplate(t, "uninstall=true", "plugins.cephfs.allowedServers=")
	if err != nil {
		t.Fatal(err)
	}
	sameObjects(t, want, got)
	got, err = helmTemplate(t, "uninstall=true", "flexvolumeDir=/home/kubernetes/flexvolume")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fmt.Sprint(got), "MOUNTPOD_INSTALL_FLEXVOLUME_DIR value:/home/kubernetes/flexvolume") {
		t.Errorf("flexvolumeDir does not reach the uninstall: %v", got)
	}
}

// sameObjects fails for each object of want the chart does not render
// alike, and each it renders that want lacks.
func sameObjects(t *testing.T, want, got map[string]map[string]any) {
	t.Helper()
	for _, k := range sortedKeys(want) {
		g, ok := got[k]
		if !ok {
			t.Errorf("the chart does not render %s", k)
			continue
		}
		if d := cmp.Diff(want[k], g); d != "" {
			t.Errorf("%s differs between the overlays (-) and the chart (+):\n%s", k, d)
		}
	}
	for _, k := range sortedKeys(got) {
		if _, ok := want[k]; !ok {
			t.Errorf("the chart renders %s, which no overlay does", k)
		}
	}
}

func sortedKeys(m map[string]map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// TestChartValues: each value the chart documents changes what it says,
// and a bad one fails the render naming it.
func TestChartValues(t *testing.T) {
	const ceph = `plugins.cephfs.allowedServers=10.0.0.1\,10.0.0.2`
	render := func(t *testing.T, set ...string) map[string]map[string]any {
		t.Helper()
		objs, err := helmTemplate(t, append([]string{ceph}, set...)...)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	defaults := render(t)

	t.Run("Digest", func(t *testing.T) {
		const d = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
		objs := render(t, "images.mountpod.digest="+d, "images.csiDriver.digest="+d, "images.csiProvisioner.digest="+d)
		images := containerImages(t, objs)
		if len(images) == 0 {
			t.Fatal("no container images rendered")
		}
		for where, img := range images {
			if !strings.HasSuffix(img, "@"+d) || strings.Contains(img, ":dev") {
				t.Errorf("%s: image %q, want it pinned by digest", where, img)
			}
		}
		if _, err := helmTemplate(t, ceph, "images.mountpod.digest=latest"); err == nil || !strings.Contains(err.Error(), "digest") {
			t.Errorf("a digest that is not sha256: %v, want a failure", err)
		}
	})
	t.Run("Plugins", func(t *testing.T) {
		objs := render(t, "plugins.cephfs.enabled=false")
		for k := range objs {
			if strings.Contains(k, "ceph") {
				t.Errorf("cephfs disabled, still rendered: %s", k)
			}
		}
		if _, ok := objs["DaemonSet/mountcontainers/glusterfs-mountpod"]; !ok {
			t.Error("cephfs disabled: glusterfs's mount pod went too")
		}
		objs = render(t, "plugins.glusterfs.csi=false")
		if _, ok := objs["CSIDriver//glusterfs.mountcontainers.io"]; ok {
			t.Error("glusterfs csi=false: its CSIDriver still rendered")
		}
		if _, ok := objs["DaemonSet/mountcontainers/glusterfs-mountpod"]; !ok {
			t.Error("glusterfs csi=false: its mount pod went too")
		}
		if _, err := helmTemplate(t); err == nil || !strings.Contains(err.Error(), "plugins.cephfs.allowedServers") {
			t.Errorf("cephfs without its monitors: %v, want a failure naming plugins.cephfs.allowedServers", err)
		}
		if _, err := helmTemplate(t, "plugins.cephfs.enabled=false"); err != nil {
			t.Errorf("cephfs disabled needs no monitors: %v", err)
		}
	})
	t.Run("AllowedServers", func(t *testing.T) {
		objs := render(t, `plugins.glusterfs.allowedServers=gluster1\,10.1.0.0/16`)
		if v := env(t, objs, "glusterfs-mountpod", "MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS"); v != "gluster1,10.1.0.0/16" {
			t.Errorf("glusterfs mount pod's allowed servers %q", v)
		}
		if v := env(t, objs, "cephfs-mountpod", "MOUNTPOD_FLEXVOLUME_ALLOWED_SERVERS"); v != "10.0.0.1,10.0.0.2" {
			t.Errorf("cephfs mount pod's allowed servers %q", v)
		}
		for _, name := range []string{"csi-glusterfs-node", "csi-glusterfs-controller"} {
			if !slices.Contains(args(t, objs, name), "--allowed-servers=gluster1,10.1.0.0/16") {
				t.Errorf("%s: args %q lack the allowed servers", name, args(t, objs, name))
			}
		}
	})
	t.Run("SharedMounts", func(t *testing.T) {
		if v, ok := envLookup(t, render(t), "glusterfs-mountpod", "MOUNTPOD_FLEXVOLUME_SHARED_MOUNTS"); ok {
			t.Errorf("by default the glusterfs mount pod sets MOUNTPOD_FLEXVOLUME_SHARED_MOUNTS=%q, want it unset (the mount pod's default)", v)
		}
		if v := env(t, render(t, "plugins.glusterfs.sharedMounts=false"), "glusterfs-mountpod", "MOUNTPOD_FLEXVOLUME_SHARED_MOUNTS"); v != "false" {
			t.Errorf("plugins.glusterfs.sharedMounts=false: MOUNTPOD_FLEXVOLUME_SHARED_MOUNTS=%q, want false", v)
		}
	})
	t.Run("Scopes", func(t *testing.T) {
		objs := render(t, "scopes.memoryLimit=1Gi", "scopes.pidsLimit=512", "scopes.oomScoreAdj=500")
		for _, ds := range []string{"glusterfs-mountpod", "cephfs-mountpod"} {
			for name, want := range map[string]string{"MOUNTPOD_SCOPE_MEMORY_LIMIT": "1Gi", "MOUNTPOD_SCOPE_PIDS_LIMIT": "512", "MOUNTPOD_SCOPE_OOM_SCORE_ADJ": "500"} {
				if v := env(t, objs, ds, name); v != want {
					t.Errorf("%s: %s=%q, want %q", ds, name, v, want)
				}
			}
		}
	})
	t.Run("Metrics", func(t *testing.T) {
		objs := render(t, "metrics.enabled=false")
		for _, ds := range []string{"glusterfs-mountpod", "cephfs-mountpod"} {
			if v, ok := envLookup(t, objs, ds, "MOUNTPOD_METRICS_ADDRESS"); !ok || v != "" {
				t.Errorf("%s: metrics off: MOUNTPOD_METRICS_ADDRESS=%q (set %v), want empty", ds, v, ok)
			}
			if y, _ := yaml.Marshal(objs["DaemonSet/mountcontainers/"+ds]); bytes.Contains(y, []byte("prometheus.io")) || bytes.Contains(y, []byte("containerPort")) {
				t.Errorf("%s: metrics off, still announced:\n%s", ds, y)
			}
		}
		if _, ok := defaults["PodMonitor/mountcontainers/mountpod"]; ok {
			t.Error("a PodMonitor by default")
		}
		objs = render(t, "metrics.podMonitor=true")
		want := overlayObjects(t, "monitoring")["PodMonitor/mountcontainers/mountpod"]
		if want == nil {
			t.Fatal("deploy/monitoring renders no PodMonitor")
		}
		if d := cmp.Diff(want, objs["PodMonitor/mountcontainers/mountpod"]); d != "" {
			t.Errorf("PodMonitor differs between deploy/monitoring (-) and the chart (+):\n%s", d)
		}
	})
	t.Run("Policy", func(t *testing.T) {
		objs := render(t, "policy.flexvolumePVOnly=false")
		for k := range objs {
			if strings.HasPrefix(k, "ValidatingAdmissionPolicy") {
				t.Errorf("policy off, still rendered: %s", k)
			}
		}
		if len(objs) != len(defaults)-4 {
			t.Errorf("policy off: %d objects, want the %d of the defaults less two policies and their bindings", len(objs), len(defaults))
		}
	})

	t.Run("KubeletDir", func(t *testing.T) {
		const dir = "/var/lib/k0s/kubelet"
		for _, set := range [][]string{{"kubeletDir=" + dir}, {"kubeletDir=" + dir, "uninstall=true"}} {
			objs := render(t, set...)
			data, err := stdjson.Marshal(objs)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(string(data), "/var/lib/kubelet") {
				t.Errorf("with %v, /var/lib/kubelet is still rendered:\n%s", set, data)
			}
			if !strings.Contains(string(data), dir+"/plugin-containers") {
				t.Errorf("with %v, the registration directory is not beneath %s", set, dir)
			}
			for k, o := range objs {
				for _, c := range containers(o) {
					if c["name"] != "csi-driver" {
						continue
					}
					args := fmt.Sprint(c["args"])
					if !strings.Contains(args, "--kubelet-dir="+dir+" ") || !strings.Contains(args, "--registration-dir="+dir+"/plugin-containers ") {
						t.Errorf("%s: the CSI driver is not told the kubelet's directory: %s", k, args)
					}
				}
			}
		}
		for _, bad := range []string{"var/lib/kubelet", "/var/lib/kubelet/", "/a,b"} {
			if _, err := helmTemplate(t, ceph, "kubeletDir="+bad); err == nil || !strings.Contains(err.Error(), "kubeletDir") {
				t.Errorf("kubeletDir=%s: %v; want the render refused naming kubeletDir", bad, err)
			}
		}
	})
}

// TestChartStorageClasses: the StorageClass the chart makes from the
// parameters of deploy/csi/<plugin>/storageclass-example.yaml is that
// example; without parameters the render fails, naming the value.
func TestChartStorageClasses(t *testing.T) {
	for _, fs := range []string{"glusterfs", "cephfs"} {
		t.Run(fs, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("csi", fs, "storageclass-example.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			want := decodeObjects(t, "the example", data)
			if len(want) != 1 {
				t.Fatalf("the example holds %d objects", len(want))
			}
			var key string
			for key = range want {
			}
			example := want[key]
			set := []string{`plugins.cephfs.allowedServers=10.0.0.1`, "storageClasses." + fs + ".create=true",
				"storageClasses." + fs + ".name=" + example["metadata"].(map[string]any)["name"].(string)}
			for k, v := range example["parameters"].(map[string]any) {
				set = append(set, "storageClasses."+fs+".parameters."+strings.ReplaceAll(k, ".", `\.`)+"="+strings.ReplaceAll(v.(string), ",", `\,`))
			}
			objs, err := helmTemplate(t, set...)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := objs[key]
			if !ok {
				t.Fatalf("the chart renders no %s", key)
			}
			example["metadata"].(map[string]any)["labels"] = map[string]any{"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/part-of": "mountcontainers"}
			if d := cmp.Diff(example, got); d != "" {
				t.Errorf("%s differs between the example (-) and the chart (+):\n%s", key, d)
			}
			if _, err := helmTemplate(t, set[0], set[1]); err == nil || !strings.Contains(err.Error(), "storageClasses."+fs+".parameters") {
				t.Errorf("a StorageClass without parameters: %v, want a failure naming the value", err)
			}
		})
	}
}

// containerImages returns every container's image, by object and container.
func containerImages(t *testing.T, objs map[string]map[string]any) map[string]string {
	t.Helper()
	images := map[string]string{}
	for k, o := range objs {
		for _, c := range containers(o) {
			images[k+"/"+c["name"].(string)] = c["image"].(string)
		}
	}
	return images
}

func containers(o map[string]any) []map[string]any {
	spec, _ := o["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	list, _ := pod["containers"].([]any)
	var out []map[string]any
	for _, c := range list {
		out = append(out, c.(map[string]any))
	}
	return out
}

// firstContainer returns the first container of the workload named name.
func firstContainer(t *testing.T, objs map[string]map[string]any, name string) map[string]any {
	t.Helper()
	for _, kind := range []string{"DaemonSet", "Deployment"} {
		if o, ok := objs[kind+"/mountcontainers/"+name]; ok {
			if cs := containers(o); len(cs) > 0 {
				return cs[0]
			}
		}
	}
	t.Fatalf("no workload %s with a container", name)
	return nil
}

func envLookup(t *testing.T, objs map[string]map[string]any, workload, name string) (string, bool) {
	t.Helper()
	list, _ := firstContainer(t, objs, workload)["env"].([]any)
	for _, e := range list {
		e := e.(map[string]any)
		if e["name"] == name {
			v, _ := e["value"].(string)
			return v, true
		}
	}
	return "", false
}

func env(t *testing.T, objs map[string]map[string]any, workload, name string) string {
	t.Helper()
	v, ok := envLookup(t, objs, workload, name)
	if !ok {
		t.Errorf("%s: no %s", workload, name)
	}
	return v
}

func args(t *testing.T, objs map[string]map[string]any, workload string) []string {
	t.Helper()
	var out []string
	list, _ := firstContainer(t, objs, workload)["args"].([]any)
	for _, a := range list {
		out = append(out, a.(string))
	}
	return out
}
