// Package metrics exports the controller's and the NGINX module's figures
// to Prometheus, on a registry of its own (never the global one).
//
// Three sources feed it. Observe records each sync pass as it happens:
// reloads, publishes, durations. What describes the current state (the
// backends, their peers and zone decisions, the own zone, the NGINX
// restarts, the running configuration's hash) is read at scrape time from
// the last pass and from live.State, so it never lags and a backend that
// is gone leaves no series behind. The module's counters (picks by
// locality, failures, the generation each worker serves) are fetched from
// NGINX during the scrape, with the scrape's context; when NGINX cannot be
// reached, zonal_nginx_status_up is 0 and those series are left out, and
// the scrape still succeeds.
//
// Labels are bounded: per backend, zone, mode or result, never per peer
// or request.
package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/zonal-ingress/zonal/controller/live"
	"github.com/zonal-ingress/zonal/controller/loop"
)

// StatusFunc fetches the NGINX module's counters (the zonal_status JSON).
type StatusFunc func(ctx context.Context) ([]byte, error)

// Version is the version zonal_build_info reports. Empty means the main
// module's version from the binary's build information.
var Version string

// Metrics holds the controller's collectors.
type Metrics struct {
	// Log receives the few things worth telling: the module's counters
	// becoming unavailable and available again, errors while serving a
	// scrape. Nil means slog.Default().
	Log *slog.Logger

	state    *live.State
	status   StatusFunc
	registry *prometheus.Registry

	reloads         *prometheus.CounterVec
	lastReloadOK    prometheus.Gauge
	lastReloadTime  prometheus.Gauge
	syncDuration    prometheus.Histogram
	syncErrors      *prometheus.CounterVec
	publishes       prometheus.Counter
	publishDuration prometheus.Histogram
	generation      prometheus.Gauge
	tableSize       prometheus.Gauge

	mu   sync.Mutex
	last *loop.Result // the last pass; nil before the first
	hash confHash
	// statusDown is set once the module's counters could not be read
	// while NGINX was running, until they can again.
	statusDown atomic.Bool
}

// New makes the collectors. state may be nil (then NGINX restarts and the
// configuration hash are not exported); so may status (then the module's
// series are not, and zonal_nginx_status_up is 0).
func New(state *live.State, status StatusFunc) *Metrics {
	m := &Metrics{
		state:    state,
		status:   status,
		registry: prometheus.NewRegistry(),
		reloads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zonal_reloads_total",
			Help: "Configurations applied to NGINX (tested with nginx -t, then loaded: the first at start, then by reload), by result: success, or failure (nginx -t or the reload refused it and the previous one keeps running).",
		}, []string{"result"}),
		lastReloadOK: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "zonal_last_reload_success",
			Help: "1 if the last configuration applied to NGINX was accepted, 0 if NGINX refused it (the previous one keeps running) or none was applied yet.",
		}),
		lastReloadTime: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "zonal_last_reload_timestamp_seconds",
			Help: "When NGINX last accepted a configuration (the first load, or a reload), in seconds since the Unix epoch.",
		}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "zonal_sync_duration_seconds",
			Help:    "Duration of the sync passes: building the model, deciding zones, publishing the endpoint table if it changed, rendering nginx.conf, and testing and reloading it if it changed.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}),
		syncErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "zonal_sync_errors_total",
			Help: "Sync passes that failed a step, by stage: render (nginx.conf could not be rendered; NGINX keeps its configuration) or publish (the endpoint table could not be published; NGINX keeps the previous table).",
		}, []string{"stage"}),
		publishes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "zonal_table_publishes_total",
			Help: "Endpoint tables published: each one reaches every NGINX worker on its next request, without a reload.",
		}),
		publishDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "zonal_table_publish_duration_seconds",
			Help:    "Time to publish an endpoint table: encoding it, writing the snapshot file, renaming it into place and advancing the generation.",
			Buckets: []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .02, .05, .1, .25},
		}),
		generation: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "zonal_table_generation",
			Help: "Generation of the last endpoint table published.",
		}),
		tableSize: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "zonal_table_size_bytes",
			Help: "Size of the last endpoint table published.",
		}),
	}
	buildInfo := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "zonal_build_info",
		Help:        "Always 1; the labels tell the zonal version and the Go version it was built with.",
		ConstLabels: prometheus.Labels{"version": version(), "goversion": runtime.Version()},
	})
	buildInfo.Set(1)
	for _, result := range []string{"success", "failure"} {
		m.reloads.WithLabelValues(result)
	}
	for _, stage := range []string{"render", "publish"} {
		m.syncErrors.WithLabelValues(stage)
	}
	m.registry.MustRegister(
		m.reloads, m.lastReloadOK, m.lastReloadTime, m.syncDuration, m.syncErrors,
		m.publishes, m.publishDuration, m.generation, m.tableSize, buildInfo,
		stateCollector{m},
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return m
}

func version() string {
	if Version != "" {
		return Version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" {
		return bi.Main.Version
	}
	return "unknown"
}

// Observe records one sync pass.
func (m *Metrics) Observe(r loop.Result) {
	m.syncDuration.Observe(r.Took.Seconds())
	switch {
	case r.Reloaded:
		m.reloads.WithLabelValues("success").Inc()
		m.lastReloadOK.Set(1)
		m.lastReloadTime.SetToCurrentTime()
	case r.ReloadErr != nil:
		m.reloads.WithLabelValues("failure").Inc()
		m.lastReloadOK.Set(0)
	}
	if r.RenderErr != nil {
		m.syncErrors.WithLabelValues("render").Inc()
	}
	if r.PublishErr != nil {
		m.syncErrors.WithLabelValues("publish").Inc()
	}
	if p := r.Published; p != nil {
		m.publishes.Inc()
		m.publishDuration.Observe(r.PublishTook.Seconds())
		m.generation.Set(float64(p.Generation))
		m.tableSize.Set(float64(p.Size))
	}
	m.mu.Lock()
	m.last = &r
	m.mu.Unlock()
}

// lastPass is the last pass observed, nil before the first.
func (m *Metrics) lastPass() *loop.Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.last
}

// Handler serves the metrics in the Prometheus exposition formats. Each
// request fetches the module's counters with the request's context.
func (m *Metrics) Handler() http.Handler {
	opts := promhttp.HandlerOpts{
		ErrorLog: errorLog{m},
		// A collector that fails leaves out its series, not the others.
		ErrorHandling: promhttp.ContinueOnError,
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scrape := prometheus.NewRegistry()
		scrape.MustRegister(moduleCollector{ctx: r.Context(), m: m})
		promhttp.HandlerFor(prometheus.Gatherers{m.registry, scrape}, opts).ServeHTTP(w, r)
	})
}

func (m *Metrics) log() *slog.Logger {
	if m.Log != nil {
		return m.Log
	}
	return slog.Default()
}

// errorLog passes promhttp's errors on to Log.
type errorLog struct{ m *Metrics }

func (l errorLog) Println(v ...any) { l.m.log().Warn("metrics: " + fmt.Sprint(v...)) }

// shutdownTimeout bounds the wait for scrapes in flight at shutdown.
const shutdownTimeout = 5 * time.Second

// ListenAndServe serves /metrics on addr until ctx ends, then shuts the
// server down gracefully. It returns an error if it cannot listen or the
// server fails, nil after ctx ended.
func (m *Metrics) ListenAndServe(ctx context.Context, addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		// Longer than any scrape: the module's counters take at most a
		// second.
		WriteTimeout: time.Minute,
		IdleTimeout:  2 * time.Minute,
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }()
	select {
	case err := <-served:
		return fmt.Errorf("metrics: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		srv.Close()
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}
