package recovery

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/kubeevents"
	"github.com/mountcontainers/mountcontainers/internal/shared/mountrecord"
)

// TestEventReporter: a recovery, a failed attempt and a refused record
// are Events on the workload pod the record names and on the mount pod; a
// record naming no pod gives the mount pod's only.
func TestEventReporter(t *testing.T) {
	events, got := eventServer(t)
	rep := EventReporter{Events: events, MountPod: kubeevents.Object{Namespace: "kube-system", Name: "glusterfs-mountpod-x", UID: podUID}}

	rec := glusterRecord()
	rec.Pod = &mountrecord.Pod{Namespace: "shop", Name: "web-0", UID: "a"} // the pod of target's directory
	rep.Recovered(rec, Result{Took: 812 * time.Millisecond, Attached: []Attached{{PID: 1}, {PID: 2}}})
	rep.Failed(rec, 3, 4*time.Second, errors.New("mount srv:/vol: no server"))
	rep.Refused(rec, errors.New("server srv is not allowed"))
	rep.Recovered(glusterRecord(), Result{Took: time.Second})
	events.Close(5 * time.Second)

	want := []struct{ ns, name, reason, says string }{
		{"shop", "web-0", ReasonRecovered, `volume "data" came back 812ms after its FUSE daemon died (srv:/vol); files open at the time must be reopened`},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecovered, "srv:/vol at " + target + " (pod shop/web-0) came back 812ms after its daemon died; attached again in 2 container(s)"},
		{"shop", "web-0", ReasonRecoveryFailed, "attempt 3, next in 4s: mount srv:/vol: no server (mount pod kube-system/glusterfs-mountpod-x)"},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecoveryFailed, "failed, attempt 3, next in 4s"},
		{"shop", "web-0", ReasonRecoveryRefused, `volume "data" is dead (its FUSE daemon died) and is not made again: server srv is not allowed (mount pod kube-system/glusterfs-mountpod-x)`},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecoveryRefused, "the FUSE mount of srv:/vol at " + target + " (pod shop/web-0) is dead and is not made again: server srv is not allowed"},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecovered, "srv:/vol at " + target + " came back 1s"},
	}
	checkEvents(t, got(), want)
}

// TestEventsOnSharedMountsPods: a record of a node's mount that pods
// share names no pod; its Events go to each pod listed beside it (the
// driver's shared mounts), naming each pod's own volume, and to the
// mount pod.
func TestEventsOnSharedMountsPods(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the pods' list must be root's: run as root")
	}
	kubelet := t.TempDir()
	node := filepath.Join(kubelet, "plugins/mountcontainers.io~glusterfs/shared/0123456789abcdef0123456789abcdef")
	if err := os.MkdirAll(node+mountrecord.PodsSuffix, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, p := range []mountrecord.Pod{{Namespace: "shop", Name: "web-0", UID: "a"}, {Namespace: "shop", Name: "web-1", UID: "b"}} {
		data, _ := json.Marshal(p)
		if err := os.WriteFile(filepath.Join(node+mountrecord.PodsSuffix, mountrecord.PodFileName(p, "data-"+p.UID)), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	events, got := eventServer(t)
	rep := EventReporter{Events: events, MountPod: kubeevents.Object{Namespace: "kube-system", Name: "glusterfs-mountpod-x", UID: podUID}}
	rec := glusterRecord()
	rec.Target = node
	rep.Recovered(rec, Result{Took: 812 * time.Millisecond, Attached: []Attached{{PID: 1}, {PID: 2}}})
	rep.Refused(rec, errors.New("server srv is not allowed"))
	events.Close(5 * time.Second)
	checkEvents(t, got(), []struct{ ns, name, reason, says string }{
		{"shop", "web-0", ReasonRecovered, `volume "data-a" came back 812ms after its FUSE daemon died (srv:/vol)`},
		{"shop", "web-1", ReasonRecovered, `volume "data-b" came back 812ms after its FUSE daemon died (srv:/vol)`},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecovered, "srv:/vol at " + node + " came back 812ms after its daemon died; attached again in 2 container(s)"},
		{"shop", "web-0", ReasonRecoveryRefused, `volume "data-a" is dead (its FUSE daemon died) and is not made again: server srv is not allowed`},
		{"shop", "web-1", ReasonRecoveryRefused, `volume "data-b" is dead`},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecoveryRefused, "the FUSE mount of srv:/vol at " + node + " is dead"},
	})
}

// TestNoEventOnAnotherPod: a record whose pod is not the one whose volume
// directory holds its target (the pod comes from the volume's options,
// the directory from the kubelet) gets no Event on that pod, and the mount
// pod's Event does not name it; a warning names the record.
func TestNoEventOnAnotherPod(t *testing.T) {
	events, got := eventServer(t)
	var log strings.Builder
	rep := EventReporter{Events: events, MountPod: kubeevents.Object{Namespace: "kube-system", Name: "glusterfs-mountpod-x", UID: podUID},
		Logger: slog.New(slog.NewTextHandler(&log, nil))}

	rec := glusterRecord() // in the directory of pod UID "a"
	rec.Pod = &mountrecord.Pod{Namespace: "bank", Name: "ledger-0", UID: "0f1e"}
	rep.Recovered(rec, Result{Took: time.Second})
	rep.Failed(rec, 1, time.Second, errors.New("no server"))
	other := rec
	other.Target = "/mnt/data" // in no pod's directory
	rep.Recovered(other, Result{Took: time.Second})
	events.Close(5 * time.Second)

	checkEvents(t, got(), []struct{ ns, name, reason, says string }{
		{"kube-system", "glusterfs-mountpod-x", ReasonRecovered, "srv:/vol at " + target + " came back 1s"},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecoveryFailed, "srv:/vol at " + target + " failed, attempt 1"},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecovered, "srv:/vol at /mnt/data came back 1s"},
	})
	for _, name := range []string{mountrecord.FileName(target), mountrecord.FileName("/mnt/data")} {
		if !strings.Contains(log.String(), "record="+name) {
			t.Errorf("log %q does not name the record %s", log.String(), name)
		}
	}
}

// posted is what the API server receives of an Event.
type posted struct {
	Metadata              struct{ Namespace string }
	InvolvedObject        struct{ Name, UID string }
	Reason, Message, Type string
}

// eventServer returns a recorder posting to an API server that keeps the
// Events posted to it; got returns them.
func eventServer(t *testing.T) (events *kubeevents.Recorder, got func() []posted) {
	t.Helper()
	var mu sync.Mutex
	var seen []posted
	s := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p posted
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &p); err != nil || !strings.HasSuffix(r.URL.Path, "/namespaces/"+p.Metadata.Namespace+"/events") {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		seen = append(seen, p)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(s.Close)
	u, _ := url.Parse(s.URL)
	return kubeevents.New(u, s.Client(), "", "mountpod", "node-1", nil), func() []posted {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen)
	}
}

func checkEvents(t *testing.T, got []posted, want []struct{ ns, name, reason, says string }) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d Events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Metadata.Namespace != w.ns || g.InvolvedObject.Name != w.name || g.Reason != w.reason || g.Type != kubeevents.Warning || !strings.Contains(g.Message, w.says) {
			t.Errorf("Event %d: %+v; want %s/%s %s saying %q", i, g, w.ns, w.name, w.reason, w.says)
		}
	}
}
