// Package kubeevents records Kubernetes Events (core/v1) on pods, with the
// service account token of the pod it runs in, for a process that must stay
// small.
//
// The mount pod reports on the workload pods whose volumes it brings back,
// and on itself. client-go's event recorder would do the same, but linking
// it (the typed client, the API types and their scheme) takes mountpod from
// 12.2 MB to 36.2 MB (4.7 MB to 11.7 MB gzipped, in an image every node
// pulls) and adds the scheme's start-up and memory to a daemon held to
// 15 MiB. What this package needs of it is one POST: it builds the Event
// and posts it itself, the way the recorder does (a name of the object's
// name and a hexadecimal time stamp, count 1, first and last time stamps).
//
// Events are best effort and never block the caller: they are queued (a
// bounded queue; when it is full an Event is dropped and counted) and
// posted by one goroutine, each post bounded by [PostTimeout]. The token is
// read for each post, since a projected token rotates. Failures are logged,
// at most one warning a minute.
package kubeevents

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"
)

// Where a pod finds its service account's credentials.
const (
	TokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token"
	CAFile    = "/var/run/secrets/kubernetes.io/serviceaccount/ca.crt"
)

// Bounds.
const (
	// QueueSize is how many Events may wait to be posted.
	QueueSize = 64
	// PostTimeout bounds each post.
	PostTimeout = 10 * time.Second
	// MaxMessage bounds an Event's message, in bytes (events.k8s.io's
	// bound on a note).
	MaxMessage = 1024
	// warnEvery is how often a failing post is logged as a warning.
	warnEvery = time.Minute
)

// Event types.
const (
	Normal  = "Normal"
	Warning = "Warning"
)

// Object is what an Event is about: a pod (apiVersion v1).
type Object struct {
	Kind      string // "Pod" when empty
	Namespace string
	Name      string
	UID       string
}

// Recorder posts Events. Its zero value is not usable: see [InCluster] and
// [New].
type Recorder struct {
	server    *url.URL
	client    *http.Client
	tokenFile string
	component string
	host      string
	log       *slog.Logger

	queue chan event
	done  chan struct{}
	once  sync.Once

	mu       sync.Mutex
	dropped  int
	failed   int
	lastWarn time.Time
}

type event struct {
	obj                  Object
	typ, reason, message string
	at                   time.Time
}

// InCluster returns a Recorder that posts to the API server of the
// cluster the pod runs in (KUBERNETES_SERVICE_HOST and _PORT) with the
// pod's service account ([TokenFile], [CAFile]); component and host are the
// Events' source. It fails, saying why, when the pod has no token (the
// mount pod then logs only).
func InCluster(component, host string, log *slog.Logger) (*Recorder, error) {
	h, p := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if h == "" || p == "" {
		return nil, errors.New("KUBERNETES_SERVICE_HOST or KUBERNETES_SERVICE_PORT is not set: not in a pod")
	}
	if _, err := os.Stat(TokenFile); err != nil {
		return nil, fmt.Errorf("no service account token (%w): the pod's automountServiceAccountToken is false", err)
	}
	ca, err := os.ReadFile(CAFile)
	if err != nil {
		return nil, fmt.Errorf("the cluster's CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("the cluster's CA %s holds no certificate", CAFile)
	}
	tr := &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
		TLSHandshakeTimeout: 5 * time.Second,
		MaxIdleConns:        1,
		IdleConnTimeout:     90 * time.Second,
	}
	server := &url.URL{Scheme: "https", Host: net.JoinHostPort(h, p)}
	return New(server, &http.Client{Transport: tr}, TokenFile, component, host, log), nil
}

// New returns a Recorder that posts to server with client, authenticated
// by the token in tokenFile (read for each post; none when empty).
func New(server *url.URL, client *http.Client, tokenFile, component, host string, log *slog.Logger) *Recorder {
	if log == nil {
		log = slog.Default()
	}
	r := &Recorder{server: server, client: client, tokenFile: tokenFile, component: component, host: host, log: log,
		queue: make(chan event, QueueSize), done: make(chan struct{})}
	go r.run()
	return r
}

// Event queues an Event on obj; it never blocks. A nil Recorder records
// nothing.
func (r *Recorder) Event(obj Object, typ, reason, message string) {
	if r == nil {
		return
	}
	select {
	case <-r.done:
		return
	default:
	}
	select {
	case r.queue <- event{obj: obj, typ: typ, reason: reason, message: message, at: time.Now()}:
	default:
		r.mu.Lock()
		r.dropped++
		r.mu.Unlock()
	}
}

// Close posts what is queued, within grace, and stops.
func (r *Recorder) Close(grace time.Duration) {
	if r == nil {
		return
	}
	r.once.Do(func() { close(r.queue) })
	select {
	case <-r.done:
	case <-time.After(grace):
	}
}

// Stats returns how many Events were dropped (queue full) and how many
// posts failed so far.
func (r *Recorder) Stats() (dropped, failed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.dropped, r.failed
}

func (r *Recorder) run() {
	defer close(r.done)
	for ev := range r.queue {
		ctx, cancel := context.WithTimeout(context.Background(), PostTimeout)
		err := r.post(ctx, ev)
		cancel()
		if err == nil {
			continue
		}
		r.mu.Lock()
		r.failed++
		warn := time.Since(r.lastWarn) >= warnEvery
		if warn {
			r.lastWarn = time.Now()
		}
		failed, dropped := r.failed, r.dropped
		r.mu.Unlock()
		attrs := []any{"reason", ev.reason, "object", ev.obj.Namespace + "/" + ev.obj.Name, "err", err, "failedSoFar", failed, "droppedSoFar", dropped}
		if warn {
			r.log.Warn("recording a Kubernetes Event failed (the log keeps what it said)", attrs...)
		} else {
			r.log.Debug("recording a Kubernetes Event failed", attrs...)
		}
	}
}

// body is a core/v1 Event, the fields a recorder sets.
type body struct {
	APIVersion         string         `json:"apiVersion"`
	Kind               string         `json:"kind"`
	Metadata           meta           `json:"metadata"`
	InvolvedObject     involvedObject `json:"involvedObject"`
	Reason             string         `json:"reason"`
	Message            string         `json:"message"`
	Type               string         `json:"type"`
	Source             source         `json:"source"`
	FirstTimestamp     string         `json:"firstTimestamp"`
	LastTimestamp      string         `json:"lastTimestamp"`
	Count              int            `json:"count"`
	ReportingComponent string         `json:"reportingComponent"`
	ReportingInstance  string         `json:"reportingInstance"`
}

type meta struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
}

type involvedObject struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace"`
	Name       string `json:"name"`
	UID        string `json:"uid"`
}

type source struct {
	Component string `json:"component"`
	Host      string `json:"host,omitempty"`
}

// body returns the JSON of the Event ev.
func (r *Recorder) body(ev event) ([]byte, error) {
	kind := ev.obj.Kind
	if kind == "" {
		kind = "Pod"
	}
	msg := ev.message
	if len(msg) > MaxMessage {
		msg = strings.ToValidUTF8(msg[:MaxMessage-3], "") + "..."
	}
	ts := ev.at.UTC().Format(time.RFC3339)
	return json.Marshal(body{
		APIVersion: "v1", Kind: "Event",
		Metadata:       meta{Name: fmt.Sprintf("%s.%x", ev.obj.Name, ev.at.UnixNano()), Namespace: ev.obj.Namespace},
		InvolvedObject: involvedObject{APIVersion: "v1", Kind: kind, Namespace: ev.obj.Namespace, Name: ev.obj.Name, UID: ev.obj.UID},
		Reason:         ev.reason, Message: msg, Type: ev.typ,
		Source:         source{Component: r.component, Host: r.host},
		FirstTimestamp: ts, LastTimestamp: ts, Count: 1,
		ReportingComponent: r.component, ReportingInstance: r.host,
	})
}

func (r *Recorder) post(ctx context.Context, ev event) error {
	data, err := r.body(ev)
	if err != nil {
		return err
	}
	u := r.server.JoinPath("api", "v1", "namespaces", ev.obj.Namespace, "events")
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if r.tokenFile != "" {
		tok, err := os.ReadFile(r.tokenFile)
		if err != nil {
			return fmt.Errorf("the service account token: %w", err)
		}
		req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 == 2 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	var status struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(msg, &status) == nil && status.Message != "" {
		msg = []byte(status.Message)
	}
	return fmt.Errorf("POST %s: %s: %s", u.Path, resp.Status, bytes.TrimSpace(msg))
}
