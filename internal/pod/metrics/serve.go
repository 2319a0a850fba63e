package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Server timeouts: a scrape is small and quick; a client that dawdles is
// dropped.
const (
	readHeaderTimeout = 5 * time.Second
	readTimeout       = 10 * time.Second
	writeTimeout      = 30 * time.Second
	idleTimeout       = 60 * time.Second
	shutdownTimeout   = 5 * time.Second
)

// Mux serves h at /metrics and "ok" at /healthz.
func Mux(h http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", h)
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}

// Listen listens on addr (host:port; ":9641" for every address) for
// [Serve].
func Listen(addr string) (net.Listener, error) {
	return net.Listen("tcp", addr)
}

// Serve serves m's /metrics and /healthz on l until ctx ends, then shuts
// the server down and returns. An error that stops it serving earlier is
// logged: metrics are never a reason for the mount pod to stop.
func Serve(ctx context.Context, l net.Listener, m *Metrics, log *slog.Logger) {
	srv := &http.Server{
		Handler:           Mux(m.Handler()),
		ReadHeaderTimeout: readHeaderTimeout,
		ReadTimeout:       readTimeout,
		WriteTimeout:      writeTimeout,
		IdleTimeout:       idleTimeout,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return ctx },
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(l) }()
	select {
	case err := <-done:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped; the mount pod goes on serving without metrics", "address", l.Addr().String(), "err", err)
		}
		return
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	<-done
}
