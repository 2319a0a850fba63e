package mountrecord

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"

	"github.com/mountcontainers/mountcontainers/pkg/registration"
)

func glusterRecord(target string) Record {
	return Record{
		Plugin: "kubernetes.io/glusterfs", Source: "srv:/vol", Target: target, FSType: "glusterfs",
		Options: []string{"backup-volfile-servers=srv2", "log-level=WARNING"},
	}
}

func TestWriteListRemove(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	a, b := glusterRecord("/var/lib/kubelet/pods/a/volumes/x"), glusterRecord("/var/lib/kubelet/pods/b/volumes/x")
	a.Pod = &Pod{Namespace: "default", Name: "web-0.x", UID: "6a1f9c5e-9e3b-4f3a-8d3c-1b2a3c4d5e6f"}
	b.Options, b.NotRecoverable = nil, "its options hold a secret"
	for _, r := range []Record{a, b} {
		if err := Write(dir, r); err != nil {
			t.Fatal(err)
		}
	}
	if st, err := os.Stat(dir); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("records directory: %v, %v; want 0700", st.Mode(), err)
	}
	es, err := List(dir)
	if err != nil || len(es) != 2 {
		t.Fatalf("List = %+v, %v; want two records", es, err)
	}
	got := map[string]Record{}
	for _, e := range es {
		if e.Err != nil {
			t.Fatal(e.Err)
		}
		if st, err := os.Stat(e.Path); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v, %v; want 0600", e.Path, st.Mode(), err)
		}
		got[e.Record.Target] = e.Record
	}
	if r := got[a.Target]; r.Version != Version || r.Source != a.Source || strings.Join(r.Options, ",") != strings.Join(a.Options, ",") || r.Pod == nil || *r.Pod != *a.Pod {
		t.Errorf("read back %+v, wrote %+v", r, a)
	}
	if r := got[b.Target]; r.NotRecoverable == "" || r.Options != nil {
		t.Errorf("read back %+v; want not recoverable, without options", r)
	}
	if err := Remove(dir, a.Target+"/"); err != nil {
		t.Fatal(err)
	}
	if err := Remove(dir, a.Target); err != nil {
		t.Fatalf("removing a missing record: %v", err)
	}
	if es, _ := List(dir); len(es) != 1 || es[0].Record.Target != b.Target {
		t.Fatalf("after Remove: %+v", es)
	}
	if es, err := List(filepath.Join(t.TempDir(), "none")); es != nil || err != nil {
		t.Fatalf("missing directory: %+v, %v", es, err)
	}
}

func TestWriteRefusesBadRecords(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	for name, mutate := range map[string]func(*Record){
		"relative target": func(r *Record) { r.Target = "pods/x" },
		"unclean target":  func(r *Record) { r.Target = "/a/../b" },
		"bad plugin":      func(r *Record) { r.Plugin = "../x" },
		"kernel type":     func(r *Record) { r.FSType = "ext4" },
		"comma option":    func(r *Record) { r.Options = []string{"a,b"} },
		"secret kept":     func(r *Record) { r.NotRecoverable = "secret" },
		"no source":       func(r *Record) { r.Source = "" },
		"pod namespace":   func(r *Record) { r.Pod = &Pod{Namespace: "Default", Name: "web", UID: "0f1e"} },
		"pod name":        func(r *Record) { r.Pod = &Pod{Namespace: "default", Name: "web/../x", UID: "0f1e"} },
		"pod UID":         func(r *Record) { r.Pod = &Pod{Namespace: "default", Name: "web", UID: "0f 1e"} },
		"pod missing":     func(r *Record) { r.Pod = &Pod{} },
	} {
		r := glusterRecord("/k/pods/a/volumes/x")
		mutate(&r)
		if err := Write(dir, r); err == nil {
			t.Errorf("%s: Write accepted %+v", name, r)
		}
	}
	if es, _ := List(dir); len(es) != 0 {
		t.Errorf("refused records were written: %+v", es)
	}
}

func TestListTrustsOnlyRootOnlyRegularFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	good := glusterRecord("/k/pods/a/volumes/x")
	if err := Write(dir, good); err != nil {
		t.Fatal(err)
	}
	other := glusterRecord("/k/pods/b/volumes/x")
	data := []byte(`{"version":1,"plugin":"kubernetes.io/glusterfs","source":"evil:/v","target":"/k/pods/b/volumes/x","fstype":"glusterfs"}`)
	// Group-writable, a symlink, a FIFO (must not block), a misnamed file,
	// an unknown field.
	writable := filepath.Join(dir, FileName(other.Target))
	if err := os.WriteFile(writable, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(writable, 0o620); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, FileName(good.Target)), filepath.Join(dir, FileName("/k/pods/c/volumes/x"))); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, FileName("/k/pods/d/volumes/x")), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, FileName("/k/pods/e/volumes/x")), data, 0o600); err != nil {
		t.Fatal(err)
	}
	unknown := strings.Replace(string(data), `"fstype"`, `"extra":1,"fstype"`, 1)
	unknown = strings.Replace(unknown, "/k/pods/b/", "/k/pods/f/", 1)
	if err := os.WriteFile(filepath.Join(dir, FileName("/k/pods/f/volumes/x")), []byte(unknown), 0o600); err != nil {
		t.Fatal(err)
	}
	es, err := List(dir)
	if err != nil {
		t.Fatal(err)
	}
	var trusted []string
	refused := 0
	for _, e := range es {
		if e.Err == nil {
			trusted = append(trusted, e.Record.Target)
			continue
		}
		refused++
		if !strings.Contains(e.Err.Error(), e.Path) {
			t.Errorf("the error %q does not name %s", e.Err, e.Path)
		}
	}
	if len(trusted) != 1 || trusted[0] != good.Target || refused != 5 {
		t.Fatalf("trusted %v, refused %d; want only %s trusted, 5 refused: %+v", trusted, refused, good.Target, es)
	}
	for _, e := range es {
		if strings.HasSuffix(e.Path, FileName(other.Target)) && !errors.Is(e.Err, registration.ErrUntrusted) {
			t.Errorf("group-writable record: %v; want ErrUntrusted", e.Err)
		}
	}
}

// FuzzDecode: whatever Decode accepts is a valid record that encodes and
// decodes to itself, under its own file name.
func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"version":1,"plugin":"kubernetes.io/glusterfs","source":"srv:/vol","target":"/k/x","fstype":"glusterfs","options":["ro"]}`))
	f.Add([]byte(`{"version":1,"plugin":"a","source":"s","target":"/","fstype":"fuse.sshfs","notRecoverable":"secret"}`))
	f.Add([]byte(`{"version":1,"plugin":"a","source":"s","target":"/t","fstype":"fuse","options":[]}`))
	f.Add([]byte(`{"version":1,"plugin":"a","source":"s","target":"/t","fstype":"fuse","pod":{"namespace":"ns","name":"a.b-c","uid":"0f1e-2"}}`))
	f.Add([]byte(`{"version":1,"plugin":"a","source":"s","target":"/t","fstype":"fuse","pod":{"namespace":"-","name":"a..b","uid":""}}`))
	f.Add([]byte(`{"version":2}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Decode(data)
		if err != nil {
			return
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("Decode accepted an invalid record %+v: %v", r, err)
		}
		data2, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := Decode(data2)
		if err != nil || !reflect.DeepEqual(r, r2) {
			t.Fatalf("Decode(Marshal(%+v)) = %+v, %v", r, r2, err)
		}
		if name := FileName(r.Target); strings.ContainsRune(name, '/') || !strings.HasPrefix(name, "mount-") {
			t.Fatalf("FileName(%q) = %q", r.Target, name)
		}
	})
}

// TestCheckPod: the pod a record names must be the one whose volume
// directory holds its target; the UID comes from the kubelet's layout.
func TestCheckPod(t *testing.T) {
	const uid = "6a1f9c5e-9e3b-4f3a-8d3c-1b2a3c4d5e6f"
	for target, want := range map[string]string{
		"/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~glusterfs/data": uid,
		"/k/pods/0f1e/volumes/x~y/v":                               "0f1e",
		"/var/lib/kubelet/pods/" + uid + "/volumes/x/data/more":    "",
		"/var/lib/kubelet/pods/" + uid + "/volume-subpaths/x/data": "",
		"/var/lib/kubelet/plugins/" + uid + "/volumes/x/data":      "",
		"/var/lib/kubelet/pods/a_b/volumes/x/data":                 "",
		"/mnt/data": "",
	} {
		got, ok := TargetPodUID(target)
		if got != want || ok != (want != "") {
			t.Errorf("TargetPodUID(%q) = %q, %v; want %q", target, got, ok, want)
		}
	}
	r := glusterRecord("/var/lib/kubelet/pods/" + uid + "/volumes/kubernetes.io~glusterfs/data")
	if err := r.CheckPod(); err != nil {
		t.Errorf("a record naming no pod: %v", err)
	}
	r.Pod = &Pod{Namespace: "shop", Name: "web-0", UID: uid}
	if err := r.CheckPod(); err != nil {
		t.Errorf("the pod of the target's volume directory: %v", err)
	}
	r.Pod.UID = "0f1e"
	if err := r.CheckPod(); err == nil || !strings.Contains(err.Error(), "pod UID "+uid) {
		t.Errorf("another pod's UID: %v; want an error naming the target's pod UID", err)
	}
	r.Target = "/mnt/data"
	if err := r.CheckPod(); err == nil || !strings.Contains(err.Error(), "not in a pod's volume directory") {
		t.Errorf("a target outside the pods' directories: %v", err)
	}
}

// TestListRefusesAnUntrustedDirectory: a records directory others may
// write, or a symbolic link to one, fails the listing, naming it; nothing
// in it is read.
func TestListRefusesAnUntrustedDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), Dir)
	if err := Write(dir, glusterRecord("/k/pods/a/volumes/x")); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if es, err := List(link); err == nil || !errors.Is(err, registration.ErrUntrusted) || !strings.Contains(err.Error(), link) || es != nil {
		t.Errorf("List(a symlink to the records) = %v, %v; want no entry and an error naming it that wraps ErrUntrusted", es, err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if es, err := List(dir); err == nil || !errors.Is(err, registration.ErrUntrusted) || !strings.Contains(err.Error(), dir) || es != nil {
		t.Errorf("List(a directory others may write) = %v, %v; want no entry and an error naming it that wraps ErrUntrusted", es, err)
	}
}

// BenchmarkList: the recovery lists the records every second. One walk of
// the directory's ancestors for all of them ("one-walk", List), against
// one walk per record ("walk-per-file", how List read them before).
func BenchmarkList(b *testing.B) {
	dir := filepath.Join(b.TempDir(), "kubelet", "plugin-containers", Dir)
	for i := range 100 {
		if err := Write(dir, glusterRecord(fmt.Sprintf("/var/lib/kubelet/pods/%d/volumes/kubernetes.io~glusterfs/v", i))); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("one-walk", func(b *testing.B) {
		for b.Loop() {
			if es, err := List(dir); err != nil || len(es) != 100 {
				b.Fatalf("%d records, %v", len(es), err)
			}
		}
	})
	b.Run("walk-per-file", func(b *testing.B) {
		for b.Loop() {
			des, err := os.ReadDir(dir)
			if err != nil {
				b.Fatal(err)
			}
			n := 0
			for _, de := range des {
				data, ok, err := registration.ReadTrusted(filepath.Join(dir, de.Name()), MaxSize)
				if err != nil || !ok {
					b.Fatal(err)
				}
				if _, err := Decode(data); err != nil {
					b.Fatal(err)
				}
				n++
			}
			if n != 100 {
				b.Fatalf("%d records", n)
			}
		}
	})
}
