// Package debug serves the controller's debug endpoint (fasthttp): its
// backends, zone decisions, the live endpoint table as the NGINX workers
// read it, the running configuration, health and readiness.
//
// Every answer is JSON except the configuration (text); an error is
// {"error": "..."} with a status that says what kind it is: 404 for an
// unknown route or backend, 405 for a method other than GET or HEAD, 503
// for something the controller does not have yet (no sync pass, no table,
// no NGINX). The endpoint is read-only and binds to loopback by default:
// it shows the cluster's topology, never key material.
package debug

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/controller/live"
)

// Routes are the paths the endpoint serves, for help texts and errors.
var Routes = []string{
	"/debug/backends",
	"/debug/backends/{name}",
	"/debug/table",
	"/debug/config",
	"/debug/model",
	"/healthz",
	"/readyz",
}

// shutdownTimeout bounds how long ListenAndServe waits for requests in
// flight when its context ends.
const shutdownTimeout = 5 * time.Second

// Server is the debug endpoint.
type Server struct {
	State *live.State
	Log   *slog.Logger
}

// ListenAndServe serves on addr until ctx ends. It returns at once if addr
// cannot be listened on.
func (s *Server) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("debug endpoint: %w (set --debug-address to a free address, or to \"\" to turn it off)", err)
	}
	s.logger().Info("debug endpoint listening", "address", ln.Addr().String())
	return s.Serve(ctx, ln)
}

// Serve serves the connections ln accepts until ctx ends, then closes ln
// and waits (a few seconds at most) for the requests in flight.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &fasthttp.Server{
		Handler:      s.Handle,
		Name:         "zonal",
		ReadTimeout:  10 * time.Second,
		WriteTimeout: 30 * time.Second,
		IdleTimeout:  30 * time.Second,
		// Requests are GETs; a body is never read.
		MaxRequestBodySize:    4096,
		NoDefaultContentType:  true,
		CloseOnShutdown:       true,
		Logger:                fasthttpLogger{s.logger()},
		SecureErrorLogMessage: true,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		if err != nil {
			return fmt.Errorf("debug endpoint: %w", err)
		}
		return nil
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	err := srv.ShutdownWithContext(sctx)
	// A shutdown that came before Serve registered ln leaves ln open:
	// closing it ends Serve in every case.
	ln.Close()
	<-served
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("debug endpoint: shutting down: %w", err)
	}
	return nil
}

// Handle answers one request.
func (s *Server) Handle(ctx *fasthttp.RequestCtx) {
	ctx.Response.Header.Set("Cache-Control", "no-store")
	path := string(ctx.Path())
	handler := s.route(path)
	if handler == nil {
		writeError(ctx, fasthttp.StatusNotFound, fmt.Sprintf("no route %s; the debug endpoint serves %s",
			path, strings.Join(Routes, ", ")))
		return
	}
	if !ctx.IsGet() && !ctx.IsHead() {
		ctx.Response.Header.Set("Allow", "GET, HEAD")
		writeError(ctx, fasthttp.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed: the debug endpoint is read-only (GET, HEAD)", ctx.Method()))
		return
	}
	handler(ctx, s.State.Get())
}

type handler func(*fasthttp.RequestCtx, live.Snapshot)

func (s *Server) route(path string) handler {
	switch path {
	case "/debug/backends":
		return s.backends
	case "/debug/table":
		return s.table
	case "/debug/config":
		return s.config
	case "/debug/model":
		return s.model
	case "/healthz":
		return s.healthz
	case "/readyz":
		return s.readyz
	}
	if name, ok := strings.CutPrefix(path, "/debug/backends/"); ok && name != "" && !strings.Contains(name, "/") {
		return func(ctx *fasthttp.RequestCtx, snap live.Snapshot) { s.backend(ctx, snap, name) }
	}
	return nil
}

// backends lists every backend with its zone decision; ?peers=true adds
// the peers, the Ingresses and the locations of each.
func (s *Server) backends(ctx *fasthttp.RequestCtx, snap live.Snapshot) {
	if !havePass(ctx, snap) {
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, backendList(snap, ctx.QueryArgs().GetBool("peers")))
}

func (s *Server) backend(ctx *fasthttp.RequestCtx, snap live.Snapshot, name string) {
	if !havePass(ctx, snap) {
		return
	}
	for i := range snap.Last.Model.Backends {
		if snap.Last.Model.Backends[i].Name == name {
			writeJSON(ctx, fasthttp.StatusOK, backendDetailOf(snap, i))
			return
		}
	}
	writeError(ctx, fasthttp.StatusNotFound, fmt.Sprintf("backend %q not found: no Ingress location or default backend names it "+
		"(backends are named <namespace>-<service>-<port>; list them with /debug/backends or zonal dbg backends list)", name))
}

// table decodes the live table through the C reader that the NGINX
// workers use: what they read, not what the controller meant to publish.
func (s *Server) table(ctx *fasthttp.RequestCtx, snap live.Snapshot) {
	if snap.TableDir == "" {
		writeError(ctx, fasthttp.StatusServiceUnavailable, "no endpoint table yet: NGINX has not started")
		return
	}
	t, err := table.ReadDir(snap.TableDir)
	if err != nil {
		writeError(ctx, fasthttp.StatusServiceUnavailable, fmt.Sprintf("reading the live table: %v", err))
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, t)
}

// config serves the nginx.conf NGINX runs.
func (s *Server) config(ctx *fasthttp.RequestCtx, snap live.Snapshot) {
	if snap.ConfFile == "" {
		writeError(ctx, fasthttp.StatusServiceUnavailable, "no configuration yet: NGINX has not started")
		return
	}
	b, err := os.ReadFile(snap.ConfFile)
	if err != nil {
		writeError(ctx, fasthttp.StatusServiceUnavailable, fmt.Sprintf("reading the running configuration: %v", err))
		return
	}
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType("text/plain; charset=utf-8")
	ctx.SetBody(b)
}

// model serves the model of the last pass, certificates by Secret name
// only.
func (s *Server) model(ctx *fasthttp.RequestCtx, snap live.Snapshot) {
	if !havePass(ctx, snap) {
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, modelViewOf(snap))
}

// havePass answers 503 and returns false before the first sync pass.
func havePass(ctx *fasthttp.RequestCtx, snap live.Snapshot) bool {
	if snap.Passes == 0 || snap.Last.Model == nil {
		writeError(ctx, fasthttp.StatusServiceUnavailable, "no sync pass has run yet: the controller is starting")
		return false
	}
	return true
}

// errorBody is every error answer.
type errorBody struct {
	Error string `json:"error"`
}

func writeError(ctx *fasthttp.RequestCtx, status int, msg string) {
	writeJSON(ctx, status, errorBody{Error: msg})
}

func writeJSON(ctx *fasthttp.RequestCtx, status int, v any) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		status = fasthttp.StatusInternalServerError
		b, _ = json.Marshal(errorBody{Error: "encoding the answer: " + err.Error()})
	}
	ctx.SetStatusCode(status)
	ctx.SetContentType("application/json")
	ctx.SetBody(append(b, '\n'))
}

func (s *Server) logger() *slog.Logger {
	if s.Log == nil {
		return slog.Default()
	}
	return s.Log
}

// fasthttpLogger passes fasthttp's own messages (connection errors) on.
type fasthttpLogger struct{ log *slog.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Warn("debug endpoint: " + fmt.Sprintf(format, args...))
}
