package metrics_test

import (
	"bytes"
	"context"
	"errors"
	"hash/fnv"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/controller/live"
	"github.com/zonal-ingress/zonal/controller/loop"
	"github.com/zonal-ingress/zonal/controller/metrics"
	zmodel "github.com/zonal-ingress/zonal/controller/model"
	"github.com/zonal-ingress/zonal/controller/zone"
)

// families is one scrape, parsed.
type families map[string]*dto.MetricFamily

// scrape GETs /metrics from h with ctx and parses the text format.
func scrape(t *testing.T, h http.Handler, ctx context.Context) (families, []byte) {
	t.Helper()
	req := httptest.NewRequestWithContext(ctx, "GET", "/metrics", nil)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != http.StatusOK {
		t.Fatalf("GET /metrics: %d %s", w.Code, w.Body)
	}
	body := w.Body.Bytes()
	p := expfmt.NewTextParser(model.LegacyValidation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	return fams, body
}

// find returns the sample of family name whose labels include the pairs
// given (name, value, name, value...), nil if there is none.
func (f families) find(name string, labels ...string) *dto.Metric {
	mf := f[name]
	if mf == nil {
		return nil
	}
	for _, m := range mf.GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if v, ok := have[labels[i]]; !ok || v != labels[i+1] {
				match = false
				break
			}
		}
		if match {
			return m
		}
	}
	return nil
}

// value is the value of a counter, gauge or untyped sample; the test fails
// if there is none.
func (f families) value(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	m := f.find(name, labels...)
	switch {
	case m == nil:
		t.Fatalf("no sample %s%v", name, labels)
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	case m.Untyped != nil:
		return m.Untyped.GetValue()
	}
	t.Fatalf("%s%v is not a counter or gauge", name, labels)
	return 0
}

// expect checks samples: name and labels → value.
func (f families) expect(t *testing.T, name string, want float64, labels ...string) {
	t.Helper()
	if got := f.value(t, name, labels...); got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

// count is the number of samples of a family.
func (f families) count(name string) int { return len(f[name].GetMetric()) }

func endpoint(addr, zoneName string) zmodel.Endpoint {
	return zmodel.Endpoint{Address: netip.MustParseAddr(addr), Port: 8080, Zone: zoneName, Ready: true, Serving: true}
}

// firstPass is what the controller's first pass might report: three
// backends, one zone-local, one without zone preference, one whose
// balanced mode fell back to all peers.
func firstPass() loop.Result {
	return loop.Result{
		Model: &zmodel.Model{Backends: []zmodel.Backend{
			{Name: "default-api-8080", Endpoints: []zmodel.Endpoint{endpoint("10.0.0.9", "")}},
			{Name: "default-bal-80", Endpoints: []zmodel.Endpoint{endpoint("10.0.1.1", "zone-b")}},
			{Name: "default-web-80", Endpoints: []zmodel.Endpoint{
				endpoint("10.0.0.1", "zone-a"), endpoint("10.0.0.2", "zone-a"), endpoint("10.0.1.2", "zone-b"),
			}},
		}},
		Decisions: []zone.Decision{
			{Mode: zone.ModeOff},
			{Mode: zone.ModeBalanced, Fallback: zone.FallbackTooFew},
			{Mode: zone.ModeLocal, Preferred: []bool{true, true, false}, LocalShare: zone.ShareOne},
		},
		Policy:      zone.Policy{Zone: "zone-a", Mode: zone.ModeAuto},
		Published:   &table.Published{Generation: 1, Size: 1200},
		PublishTook: 2 * time.Millisecond,
		Reloaded:    true,
		Took:        5 * time.Millisecond,
	}
}

// Every sync pass is counted as it happens; the backends, peers and zone
// decisions describe the last pass only.
func TestObserve(t *testing.T) {
	m := metrics.New(&live.State{}, nil)
	before := time.Now()
	m.Observe(firstPass())
	f, _ := scrape(t, m.Handler(), context.Background())

	f.expect(t, "zonal_reloads_total", 1, "result", "success")
	f.expect(t, "zonal_reloads_total", 0, "result", "failure")
	f.expect(t, "zonal_last_reload_success", 1)
	if ts := f.value(t, "zonal_last_reload_timestamp_seconds"); ts < float64(before.Unix()) || ts > float64(time.Now().Unix()+1) {
		t.Errorf("zonal_last_reload_timestamp_seconds %v, want about now (%d)", ts, before.Unix())
	}
	f.expect(t, "zonal_table_publishes_total", 1)
	f.expect(t, "zonal_table_generation", 1)
	f.expect(t, "zonal_table_size_bytes", 1200)
	f.expect(t, "zonal_backends", 3)
	f.expect(t, "zonal_backend_peers", 3, "backend", "default-web-80")
	f.expect(t, "zonal_backend_peers", 1, "backend", "default-api-8080")
	f.expect(t, "zonal_backend_local_share", 1, "backend", "default-web-80")
	f.expect(t, "zonal_backend_local_share", 0, "backend", "default-api-8080")
	f.expect(t, "zonal_backend_zone_mode", 1, "backend", "default-web-80", "mode", "local")
	f.expect(t, "zonal_backend_zone_mode", 1, "backend", "default-api-8080", "mode", "off")
	f.expect(t, "zonal_backend_zone_mode", 1, "backend", "default-bal-80", "mode", "balanced")
	f.expect(t, "zonal_backend_zone_fallback", 1, "backend", "default-bal-80", "reason", zone.FallbackTooFew)
	if n := f.count("zonal_backend_zone_fallback"); n != 1 {
		t.Errorf("%d zonal_backend_zone_fallback series, want the one backend that falls back", n)
	}
	f.expect(t, "zonal_peers", 2, "zone", "zone-a", "preferred", "true")
	f.expect(t, "zonal_peers", 2, "zone", "zone-b", "preferred", "false")
	f.expect(t, "zonal_peers", 1, "zone", "unknown", "preferred", "false")
	if n := f.count("zonal_peers"); n != 3 {
		t.Errorf("%d zonal_peers series, want 3", n)
	}
	f.expect(t, "zonal_zone_info", 1, "zone", "zone-a")
	f.expect(t, "zonal_own_zone_known", 1)

	// A configuration NGINX refuses, then a render error with a new table,
	// and a backend gone.
	m.Observe(loop.Result{
		Model: firstPass().Model, Decisions: firstPass().Decisions, Policy: firstPass().Policy,
		ReloadErr: errors.New("nginx -t: unknown directive"), Took: 30 * time.Millisecond,
	})
	third := firstPass()
	third.Model = &zmodel.Model{Backends: third.Model.Backends[2:]}
	third.Decisions = third.Decisions[2:]
	third.Reloaded = false
	third.RenderErr = errors.New("rendering nginx.conf: bad path")
	third.Published = &table.Published{Generation: 2, Size: 800}
	third.PublishTook = 3 * time.Millisecond
	third.Took = 10 * time.Millisecond
	m.Observe(third)
	f, _ = scrape(t, m.Handler(), context.Background())

	f.expect(t, "zonal_reloads_total", 1, "result", "success")
	f.expect(t, "zonal_reloads_total", 1, "result", "failure")
	f.expect(t, "zonal_last_reload_success", 0)
	f.expect(t, "zonal_sync_errors_total", 1, "stage", "render")
	f.expect(t, "zonal_sync_errors_total", 0, "stage", "publish")
	f.expect(t, "zonal_table_publishes_total", 2)
	f.expect(t, "zonal_table_generation", 2)
	f.expect(t, "zonal_table_size_bytes", 800)
	f.expect(t, "zonal_backends", 1)
	if f.find("zonal_backend_peers", "backend", "default-api-8080") != nil ||
		f.find("zonal_backend_zone_fallback", "backend", "default-bal-80") != nil {
		t.Error("a backend gone from the model still has series")
	}
	f.expect(t, "zonal_peers", 2, "zone", "zone-a", "preferred", "true")
	f.expect(t, "zonal_peers", 1, "zone", "zone-b", "preferred", "false")

	sync := f.find("zonal_sync_duration_seconds").GetHistogram()
	if sync.GetSampleCount() != 3 || !near(sync.GetSampleSum(), 0.045) {
		t.Errorf("zonal_sync_duration_seconds: %d samples, sum %v; want 3, 0.045", sync.GetSampleCount(), sync.GetSampleSum())
	}
	publish := f.find("zonal_table_publish_duration_seconds").GetHistogram()
	if publish.GetSampleCount() != 2 || !near(publish.GetSampleSum(), 0.005) {
		t.Errorf("zonal_table_publish_duration_seconds: %d samples, sum %v; want 2, 0.005", publish.GetSampleCount(), publish.GetSampleSum())
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }

// Without an own zone the zone is "unknown" and said to be unknown.
func TestUnknownZone(t *testing.T) {
	m := metrics.New(nil, nil)
	r := firstPass()
	r.Policy.Zone = ""
	m.Observe(r)
	f, _ := scrape(t, m.Handler(), context.Background())
	f.expect(t, "zonal_zone_info", 1, "zone", "unknown")
	f.expect(t, "zonal_own_zone_known", 0)
	if n := f.count("zonal_zone_info"); n != 1 {
		t.Errorf("%d zonal_zone_info series, want 1", n)
	}
}

// Before the first pass there is nothing to say about the model, and no
// series for it.
func TestBeforeFirstPass(t *testing.T) {
	m := metrics.New(&live.State{}, nil)
	f, _ := scrape(t, m.Handler(), context.Background())
	for _, name := range []string{"zonal_backends", "zonal_zone_info", "zonal_config_hash", "zonal_nginx_restarts_total"} {
		if f[name] != nil {
			t.Errorf("%s before the first pass: %v", name, f[name])
		}
	}
	f.expect(t, "zonal_reloads_total", 0, "result", "success")
	f.expect(t, "zonal_nginx_status_up", 0)
}

const statusJSON = `{"workers":[{"pid":101,"generation":7,"refused":0},{"pid":102,"generation":5,"refused":2},` +
	`{"pid":103,"generation":0,"refused":0}],"overflow":3,"backends":[` +
	`{"name":"default-web-80","local":990,"remote":10,"failures":4},{"name":"default-api-8080","local":0,"remote":50,"failures":0}]}` + "\n"

type ctxKey struct{}

// The module's counters are fetched at scrape time with the scrape's
// context and exported by backend and locality.
func TestModuleCounters(t *testing.T) {
	var calls int
	m := metrics.New(&live.State{}, func(ctx context.Context) ([]byte, error) {
		calls++
		if ctx.Value(ctxKey{}) != "scrape" {
			t.Error("the status function did not get the scrape's context")
		}
		return []byte(statusJSON), nil
	})
	ctx := context.WithValue(context.Background(), ctxKey{}, "scrape")
	f, _ := scrape(t, m.Handler(), ctx)
	if calls != 1 {
		t.Errorf("%d status fetches for one scrape", calls)
	}
	f.expect(t, "zonal_nginx_status_up", 1)
	f.expect(t, "zonal_upstream_picks_total", 990, "backend", "default-web-80", "locality", "local")
	f.expect(t, "zonal_upstream_picks_total", 10, "backend", "default-web-80", "locality", "remote")
	f.expect(t, "zonal_upstream_picks_total", 0, "backend", "default-api-8080", "locality", "local")
	f.expect(t, "zonal_upstream_picks_total", 50, "backend", "default-api-8080", "locality", "remote")
	f.expect(t, "zonal_upstream_failures_total", 4, "backend", "default-web-80")
	f.expect(t, "zonal_upstream_failures_total", 0, "backend", "default-api-8080")
	f.expect(t, "zonal_upstream_counters_overflow_total", 3)
	f.expect(t, "zonal_nginx_workers", 3)
	// The worker at generation 0 has loaded no table; it is not behind.
	f.expect(t, "zonal_table_oldest_generation_in_use", 5)
	f.expect(t, "zonal_table_refusals", 2)
	if typ := f["zonal_upstream_picks_total"].GetType(); typ != dto.MetricType_COUNTER {
		t.Errorf("zonal_upstream_picks_total is a %v, want a counter", typ)
	}
}

// When NGINX cannot be asked, the scrape still succeeds: the module's
// series are left out and zonal_nginx_status_up says why.
func TestModuleUnavailable(t *testing.T) {
	for name, status := range map[string]metrics.StatusFunc{
		"error":    func(context.Context) ([]byte, error) { return nil, errors.New("connection refused") },
		"not JSON": func(context.Context) ([]byte, error) { return []byte("<html>502</html>"), nil },
		"none":     nil,
	} {
		t.Run(name, func(t *testing.T) {
			m := metrics.New(&live.State{}, status)
			m.Observe(firstPass())
			f, _ := scrape(t, m.Handler(), context.Background())
			f.expect(t, "zonal_nginx_status_up", 0)
			for _, name := range []string{"zonal_upstream_picks_total", "zonal_upstream_failures_total",
				"zonal_table_oldest_generation_in_use", "zonal_nginx_workers"} {
				if f[name] != nil {
					t.Errorf("%s exported without the module's counters", name)
				}
			}
			f.expect(t, "zonal_backends", 3)
		})
	}
}

type fakeNGINX struct{ restarts uint64 }

func (fakeNGINX) MasterPID() int     { return 4242 }
func (fakeNGINX) Reloads() uint64    { return 0 }
func (n fakeNGINX) Restarts() uint64 { return n.restarts }

func writeAtomically(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path+".new", []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".new", path); err != nil {
		t.Fatal(err)
	}
}

func hash52(s string) float64 {
	h := fnv.New64a()
	io.WriteString(h, s)
	return float64(h.Sum64() & (1<<52 - 1))
}

// The configuration hash follows the nginx.conf on disk, which the
// controller replaces only with configurations NGINX accepted.
func TestConfigHashAndRestarts(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "nginx.conf")
	writeAtomically(t, conf, "events {}\n")
	state := &live.State{}
	state.Started(fakeNGINX{restarts: 2}, filepath.Join(dir, "table"), conf)
	m := metrics.New(state, nil)

	f, _ := scrape(t, m.Handler(), context.Background())
	f.expect(t, "zonal_config_hash", hash52("events {}\n"))
	f.expect(t, "zonal_nginx_restarts_total", 2)

	writeAtomically(t, conf, "events {}\nhttp {}\n")
	f, _ = scrape(t, m.Handler(), context.Background())
	f.expect(t, "zonal_config_hash", hash52("events {}\nhttp {}\n"))
	if hash52("events {}\n") == hash52("events {}\nhttp {}\n") {
		t.Fatal("test needs two configurations with different hashes")
	}
}

// Every series is named zonal_ (besides the Go runtime's and the
// process's), has help text, and passes Prometheus' own linter.
func TestNamesAndHelp(t *testing.T) {
	m := metrics.New(&live.State{}, func(context.Context) ([]byte, error) { return []byte(statusJSON), nil })
	m.Observe(firstPass())
	f, body := scrape(t, m.Handler(), context.Background())
	for _, name := range slices.Sorted(maps.Keys(f)) {
		if !strings.HasPrefix(name, "zonal_") && !strings.HasPrefix(name, "go_") && !strings.HasPrefix(name, "process_") {
			t.Errorf("%s is not named zonal_", name)
		}
		if strings.TrimSpace(f[name].GetHelp()) == "" {
			t.Errorf("%s has no help text", name)
		}
	}
	problems, err := promlint.New(bytes.NewReader(body)).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		if strings.HasPrefix(p.Metric, "zonal_") {
			t.Errorf("promlint: %s: %s", p.Metric, p.Text)
		}
	}
}

// Passes and scrapes run concurrently in the controller (go test -race).
func TestConcurrentObserveAndScrape(t *testing.T) {
	m := metrics.New(&live.State{}, func(context.Context) ([]byte, error) { return []byte(statusJSON), nil })
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range 200 {
			r := firstPass()
			r.Published = &table.Published{Generation: uint64(i + 1), Size: 100}
			m.Observe(r)
		}
	}()
	for range 20 {
		scrape(t, m.Handler(), context.Background())
	}
	wg.Wait()
	f, _ := scrape(t, m.Handler(), context.Background())
	f.expect(t, "zonal_table_publishes_total", 200)
	f.expect(t, "zonal_table_generation", 200)
}

// ListenAndServe serves /metrics until its context ends, then returns
// nil; an address it cannot listen on is an error at once.
func TestListenAndServe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()

	m := metrics.New(&live.State{}, nil)
	m.Observe(firstPass())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.ListenAndServe(ctx, addr) }()

	var resp *http.Response
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err = http.Get("http://" + addr + "/metrics")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	if f, err := p.TextToMetricFamilies(bytes.NewReader(body)); err != nil || f["zonal_backends"] == nil {
		t.Errorf("GET /metrics: zonal_backends missing (parse error %v)", err)
	}

	// The same address again: taken.
	if err := m.ListenAndServe(context.Background(), addr); err == nil {
		t.Errorf("a second ListenAndServe on %s succeeded", addr)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ListenAndServe after its context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenAndServe did not return after its context ended")
	}
}
