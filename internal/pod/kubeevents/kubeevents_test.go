package kubeevents

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// apiServer is a TLS server that takes Events as the API server does, or
// refuses them with a Status.
type apiServer struct {
	*httptest.Server
	mu     sync.Mutex
	posts  []post
	refuse bool
	block  chan struct{}
}

type post struct {
	path, auth string
	event      map[string]any
}

func newAPIServer(t *testing.T) *apiServer {
	s := &apiServer{}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.block != nil {
			<-s.block
		}
		var ev map[string]any
		data, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(data, &ev) != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.posts = append(s.posts, post{path: r.URL.Path, auth: r.Header.Get("Authorization"), event: ev})
		refuse := s.refuse
		s.mu.Unlock()
		if refuse {
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"kind":"Status","message":"events is forbidden: User \"system:serviceaccount:kube-system:x\" cannot create resource \"events\""}`))
			return
		}
		w.WriteHeader(http.StatusCreated)
		w.Write(data)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *apiServer) got() []post {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]post(nil), s.posts...)
}

func newRecorder(t *testing.T, s *apiServer, log *slog.Logger) (*Recorder, string) {
	t.Helper()
	u, _ := url.Parse(s.URL)
	token := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(token, []byte("token-1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := New(u, s.Client(), token, "mountpod", "node-1", log)
	t.Cleanup(func() { r.Close(time.Second) })
	return r, token
}

func TestEventIsPostedAsTheAPIServerTakesIt(t *testing.T) {
	s := newAPIServer(t)
	r, token := newRecorder(t, s, nil)
	web := Object{Namespace: "shop", Name: "web-0", UID: "6a1f9c5e-0001"}
	r.Event(web, Warning, "FUSEMountRecovered", "volume data came back")
	// A rotated token is read for the next post.
	for deadline := time.Now().Add(time.Minute); len(s.got()) == 0 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if err := os.WriteFile(token, []byte("token-2"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.Event(Object{Namespace: "kube-system", Name: "glusterfs-mountpod-x", UID: "u2"}, Normal, "Yielded", strings.Repeat("é", MaxMessage))
	r.Close(5 * time.Second)

	posts := s.got()
	if len(posts) != 2 {
		t.Fatalf("%d posts, want 2: %+v", len(posts), posts)
	}
	p := posts[0]
	if p.path != "/api/v1/namespaces/shop/events" || p.auth != "Bearer token-1" {
		t.Errorf("first post to %s with %q", p.path, p.auth)
	}
	ev := p.event
	obj, _ := ev["involvedObject"].(map[string]any)
	md, _ := ev["metadata"].(map[string]any)
	src, _ := ev["source"].(map[string]any)
	switch {
	case ev["apiVersion"] != "v1" || ev["kind"] != "Event":
		t.Errorf("not a v1 Event: %v", ev)
	case obj["kind"] != "Pod" || obj["apiVersion"] != "v1" || obj["namespace"] != "shop" || obj["name"] != "web-0" || obj["uid"] != "6a1f9c5e-0001":
		t.Errorf("involvedObject %v", obj)
	case md["namespace"] != "shop" || !strings.HasPrefix(md["name"].(string), "web-0."):
		t.Errorf("metadata %v", md)
	case ev["reason"] != "FUSEMountRecovered" || ev["type"] != "Warning" || ev["message"] != "volume data came back" || ev["count"] != 1.0:
		t.Errorf("event %v", ev)
	case src["component"] != "mountpod" || src["host"] != "node-1" || ev["reportingComponent"] != "mountpod" || ev["reportingInstance"] != "node-1":
		t.Errorf("source %v", ev)
	}
	if _, err := time.Parse(time.RFC3339, ev["firstTimestamp"].(string)); err != nil {
		t.Errorf("firstTimestamp: %v", err)
	}
	if p := posts[1]; p.auth != "Bearer token-2" {
		t.Errorf("after the token rotated, posted with %q", p.auth)
	}
	if m := posts[1].event["message"].(string); len(m) > MaxMessage || !strings.HasSuffix(m, "...") || !strings.HasPrefix(m, "é") {
		t.Errorf("a long message is %d bytes: %q", len(m), m)
	}
}

// A refused Event is logged with the API server's reason, once a minute
// at most; the caller never sees it.
func TestRefusedEventIsLogged(t *testing.T) {
	s := newAPIServer(t)
	s.refuse = true
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
	r, _ := newRecorder(t, s, log)
	for range 3 {
		r.Event(Object{Namespace: "shop", Name: "web-0", UID: "u"}, Warning, "FUSEMountRecovered", "m")
	}
	r.Close(5 * time.Second)
	if _, failed := r.Stats(); failed != 3 {
		t.Errorf("%d failed posts, want 3", failed)
	}
	mu.Lock()
	out := buf.String()
	mu.Unlock()
	if strings.Count(out, "level=WARN") != 1 || !strings.Contains(out, "403 Forbidden") || !strings.Contains(out, "cannot create resource") {
		t.Errorf("log, want one warning with the API server's reason:\n%s", out)
	}
}

// Event never blocks: with the API server stuck, a full queue drops.
func TestEventNeverBlocks(t *testing.T) {
	s := newAPIServer(t)
	s.block = make(chan struct{})
	r, _ := newRecorder(t, s, slog.New(slog.NewTextHandler(io.Discard, nil)))
	// Never blocking is the verdict, with a hang guard far above the
	// microseconds it takes; how long it took is logged.
	within := func(what string, f func()) {
		t.Helper()
		start := time.Now()
		done := make(chan struct{})
		go func() { defer close(done); f() }()
		select {
		case <-done:
			t.Logf("%s took %s", what, time.Since(start))
		case <-time.After(time.Minute):
			t.Fatalf("%s still blocks after a minute", what)
		}
	}
	within("queueing with the API server stuck", func() {
		for range QueueSize + 10 {
			r.Event(Object{Namespace: "ns", Name: "p", UID: "u"}, Normal, "R", "m")
		}
	})
	if dropped, _ := r.Stats(); dropped < 9 {
		t.Errorf("%d dropped, want at least 9 (the queue holds %d, one post is under way)", dropped, QueueSize)
	}
	within("Close with a grace of 200ms and the API server stuck", func() { r.Close(200 * time.Millisecond) })
	close(s.block)
	var nilRecorder *Recorder
	nilRecorder.Event(Object{}, Normal, "R", "m") // records nothing, does not panic
	nilRecorder.Close(0)
}

func TestInClusterNeedsAToken(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	if _, err := InCluster("mountpod", "n", nil); err == nil || !strings.Contains(err.Error(), "KUBERNETES_SERVICE_HOST") {
		t.Errorf("outside a pod: %v", err)
	}
	t.Setenv("KUBERNETES_SERVICE_HOST", "127.0.0.1")
	t.Setenv("KUBERNETES_SERVICE_PORT", "6443")
	if _, err := os.Stat(TokenFile); err == nil {
		t.Skip("this test runs in a pod with a token")
	}
	if _, err := InCluster("mountpod", "n", nil); err == nil || !strings.Contains(err.Error(), "automountServiceAccountToken") {
		t.Errorf("without a token: %v", err)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
