package recovery

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/kubeevents"
	"github.com/mountcontainers/mountcontainers/internal/mountrecord"
)

// TestEventReporter: a recovery and a failed attempt are Events on the
// workload pod the record names and on the mount pod; a record naming no
// pod gives the mount pod's only.
func TestEventReporter(t *testing.T) {
	type posted struct {
		Metadata              struct{ Namespace string }
		InvolvedObject        struct{ Name, UID string }
		Reason, Message, Type string
	}
	var mu sync.Mutex
	var got []posted
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p posted
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &p); err != nil || !strings.HasSuffix(r.URL.Path, "/namespaces/"+p.Metadata.Namespace+"/events") {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	events := kubeevents.New(u, srv.Client(), "", "mountpod", "node-1", nil)
	rep := EventReporter{Events: events, MountPod: kubeevents.Object{Namespace: "kube-system", Name: "glusterfs-mountpod-x", UID: podUID}}

	rec := glusterRecord()
	rec.Pod = &mountrecord.Pod{Namespace: "shop", Name: "web-0", UID: "0f1e"}
	rep.Recovered(rec, Result{Took: 812 * time.Millisecond, Attached: []Attached{{PID: 1}, {PID: 2}}})
	rep.Failed(rec, 3, 4*time.Second, errors.New("mount srv:/vol: no server"))
	rep.Recovered(glusterRecord(), Result{Took: time.Second})
	events.Close(5 * time.Second)

	want := []struct{ ns, name, reason, says string }{
		{"shop", "web-0", ReasonRecovered, `volume "data" came back 812ms after its FUSE daemon died (srv:/vol); files open at the time must be reopened`},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecovered, "srv:/vol at " + target + " (pod shop/web-0) came back 812ms after its daemon died; attached again in 2 container(s)"},
		{"shop", "web-0", ReasonRecoveryFailed, "attempt 3, next in 4s: mount srv:/vol: no server (mount pod kube-system/glusterfs-mountpod-x)"},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecoveryFailed, "failed, attempt 3, next in 4s"},
		{"kube-system", "glusterfs-mountpod-x", ReasonRecovered, "srv:/vol at " + target + " came back 1s"},
	}
	mu.Lock()
	defer mu.Unlock()
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
