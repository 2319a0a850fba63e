package registrar

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/mountcontainers/mountcontainers/internal/pod/kubeevents"
)

type recordingObserver struct{ seen []string }

func (r *recordingObserver) RegistrationState(plugin string, s State) {
	r.seen = append(r.seen, plugin+" "+string(s))
}
func (r *recordingObserver) RegistrationEvent(plugin string, e Event) {
	r.seen = append(r.seen, plugin+" "+string(e))
}

// TestEventObserver: a yield, a take-back and a failing write are Events on
// the mount pod; a state seen again is not; everything reaches Next.
func TestEventObserver(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev struct {
			InvolvedObject struct{ Name string }
			Reason, Type   string
		}
		data, _ := io.ReadAll(r.Body)
		if json.Unmarshal(data, &ev) != nil {
			http.Error(w, "bad", http.StatusBadRequest)
			return
		}
		mu.Lock()
		got = append(got, ev.InvolvedObject.Name+" "+ev.Type+" "+ev.Reason)
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	events := kubeevents.New(u, srv.Client(), "", "mountpod", "node-1", nil)
	next := &recordingObserver{}
	o := &EventObserver{Next: next, Events: events, Pod: kubeevents.Object{Namespace: "kube-system", Name: "mp", UID: "u"}}

	const p = "kubernetes.io/glusterfs"
	o.RegistrationState(p, StateRegistered)
	o.RegistrationState(p, StateRegistered)
	o.RegistrationState(p, StateYielded)
	o.RegistrationEvent(p, EventYielded)
	o.RegistrationState(p, StateYielded)
	o.RegistrationState(p, StateRegistered)
	o.RegistrationState(p, StateFailing)
	o.RegistrationEvent(p, EventRecreated)
	o.ToolsMissing(&MissingToolsError{Missing: []string{"mount.glusterfs"}, SearchPath: "/usr/sbin"})
	events.Close(5 * time.Second)

	want := []string{"mp Warning " + ReasonYielded, "mp Normal " + ReasonTakenBack, "mp Warning " + ReasonRegistrationFail, "mp Warning " + ReasonToolsMissing}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(got, want) {
		t.Errorf("Events %q, want %q", got, want)
	}
	if len(next.seen) != 8 {
		t.Errorf("Next saw %q, want all 8 calls", next.seen)
	}
}
