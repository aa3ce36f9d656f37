package controller

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/zonal-ingress/zonal/test/harness"
)

// metricsManifests route host shop.test to Service web (port 80), which
// asks for zone-local routing, with one EndpointSlice per backend: ready
// as given, in the backend's zone.
func metricsManifests(backends []*harness.EchoBackend, ready func(*harness.EchoBackend) bool) map[string]string {
	var eps strings.Builder
	for _, be := range backends {
		fmt.Fprintf(&eps, `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-%s
  namespace: shop
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- {name: http, port: %d}
endpoints:
- addresses: [%q]
  zone: %s
  conditions: {ready: %t}
`, be.Name, be.Port(), be.IP(), be.Zone, ready(be))
	}
	return map[string]string{
		"ingress.yaml": `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: zonal
spec:
  controller: zonal.dev/ingress-controller
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: shop
spec:
  ingressClassName: zonal
  rules:
  - host: shop.test
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80
`,
		"services.yaml": `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  annotations:
    zonal.dev/zone-mode: local
spec:
  ports:
  - {name: http, port: 80, targetPort: 8080}
` + eps.String(),
	}
}

// promFamilies is one scrape of /metrics, parsed.
type promFamilies map[string]*dto.MetricFamily

// scrapeMetrics GETs url and parses the Prometheus text format.
func scrapeMetrics(url string) (promFamilies, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("GET %s: %s: %.300s", url, resp.Status, body)
	}
	p := expfmt.NewTextParser(model.LegacyValidation)
	f, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: parsing: %w", url, err)
	}
	return f, nil
}

// sample is the value of the counter or gauge name whose labels include
// the pairs given (name, value, ...), and whether there is one.
func (f promFamilies) sample(name string, labels ...string) (float64, bool) {
	for _, m := range f[name].GetMetric() {
		have := map[string]string{}
		for _, lp := range m.GetLabel() {
			have[lp.GetName()] = lp.GetValue()
		}
		match := true
		for i := 0; i+1 < len(labels); i += 2 {
			if v, ok := have[labels[i]]; !ok || v != labels[i+1] {
				match = false
			}
		}
		if !match {
			continue
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		}
	}
	return 0, false
}

// metricWant is what a sample should be: ok tells, want says it.
type metricWant struct {
	name   string
	labels []string
	ok     func(float64) bool
	want   string
}

func eq(v float64) func(float64) bool      { return func(x float64) bool { return x == v } }
func atLeast(v float64) func(float64) bool { return func(x float64) bool { return x >= v } }

// check compares samples with what they should be, and returns the
// differences, nil when there are none.
func (f promFamilies) check(wants []metricWant) error {
	var errs []error
	for _, w := range wants {
		v, ok := f.sample(w.name, w.labels...)
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s%v missing, want %s", w.name, w.labels, w.want))
		case !w.ok(v):
			errs = append(errs, fmt.Errorf("%s%v = %v, want %s", w.name, w.labels, v, w.want))
		}
	}
	return errors.Join(errs...)
}

// TestMetrics runs bin/zonal with /metrics on a loopback port, sends
// requests through NGINX to a Service that asks for zone-local routing,
// and checks what the scrape tells: every pick local, the table, the
// reload, the own zone, the peers by zone; then takes the local endpoints
// out of service and checks that the table moves on without a reload and
// the picks turn remote.
func TestMetrics(t *testing.T) {
	t.Parallel()
	a1 := harness.StartEchoBackend(t, "a1", "127.0.0.231", "zone-a")
	a2 := harness.StartEchoBackend(t, "a2", "127.0.0.232", "zone-a")
	b1 := harness.StartEchoBackend(t, "b1", "127.0.0.233", "zone-b")
	all := []*harness.EchoBackend{a1, a2, b1}

	port, err := harness.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	metricsURL := "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) + "/metrics"
	c := harness.StartController(t, harness.ControllerConfig{
		Manifests: metricsManifests(all, func(*harness.EchoBackend) bool { return true }),
		Zone:      "zone-a",
		Args:      []string{"--metrics-address", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), "--debug-address="},
	})
	hc := c.Client(harness.ClientOptions{KeepAlive: true})

	// NGINX serves the module's counters only on its unix socket: on the
	// HTTP port /zonal/status is a path like any other.
	if r := get(t, hc, "http://"+c.HTTPAddr+"/zonal/status"); r.Status != http.StatusNotFound || r.Backend() != "" {
		t.Errorf("GET /zonal/status on the HTTP port: %s, want 404 from NGINX", describe(r))
	}

	const n = 60
	for i := range n {
		r := get(t, hc, "http://shop.test/")
		if r.Status != http.StatusOK || (r.Backend() != "a1" && r.Backend() != "a2") {
			t.Fatalf("request %d: %s, want 200 from a1 or a2 in zone-a", i, describe(r))
		}
	}

	const backend = "shop-web-80"
	var f promFamilies
	err = harness.WaitUntil(10*time.Second, 50*time.Millisecond, func() error {
		f, err = scrapeMetrics(metricsURL)
		if err != nil {
			return err
		}
		if up, _ := f.sample("zonal_nginx_status_up"); up != 1 {
			return errors.New("zonal_nginx_status_up is not 1")
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scraping %s: %v\n--- controller log:\n%s", metricsURL, err, c.Log())
	}
	conf, err := os.ReadFile(c.ConfFile())
	if err != nil {
		t.Fatal(err)
	}
	h := fnv.New64a()
	h.Write(conf)
	confHash := float64(h.Sum64() & (1<<52 - 1))
	err = f.check([]metricWant{
		{"zonal_upstream_picks_total", []string{"backend", backend, "locality", "local"}, eq(n), strconv.Itoa(n)},
		{"zonal_upstream_picks_total", []string{"backend", backend, "locality", "remote"}, eq(0), "0"},
		{"zonal_upstream_failures_total", []string{"backend", backend}, eq(0), "0"},
		{"zonal_table_generation", nil, atLeast(1), ">= 1"},
		{"zonal_table_publishes_total", nil, atLeast(1), ">= 1"},
		{"zonal_table_size_bytes", nil, atLeast(1), "> 0"},
		{"zonal_table_oldest_generation_in_use", nil, atLeast(1), ">= 1"},
		{"zonal_reloads_total", []string{"result", "success"}, atLeast(1), ">= 1"},
		{"zonal_reloads_total", []string{"result", "failure"}, eq(0), "0"},
		{"zonal_last_reload_success", nil, eq(1), "1"},
		{"zonal_config_hash", nil, eq(confHash), fmt.Sprintf("the hash of %s (%v)", c.ConfFile(), confHash)},
		{"zonal_zone_info", []string{"zone", "zone-a"}, eq(1), "1"},
		{"zonal_own_zone_known", nil, eq(1), "1"},
		{"zonal_backends", nil, eq(1), "1"},
		{"zonal_backend_peers", []string{"backend", backend}, eq(3), "3"},
		{"zonal_backend_local_share", []string{"backend", backend}, eq(1), "1"},
		{"zonal_backend_zone_mode", []string{"backend", backend, "mode", "local"}, eq(1), "1"},
		{"zonal_peers", []string{"zone", "zone-a", "preferred", "true"}, eq(2), "2"},
		{"zonal_peers", []string{"zone", "zone-b", "preferred", "false"}, eq(1), "1"},
		// A worker reports once it has loaded its first table, as it
		// starts; right after the start one may not have yet (seen).
		{"zonal_nginx_workers", nil, atLeast(1), ">= 1"},
		{"zonal_nginx_restarts_total", nil, eq(0), "0"},
	})
	if err != nil {
		t.Errorf("after %d requests:\n%v", n, err)
	}
	gen, _ := f.sample("zonal_table_generation")
	if oldest, _ := f.sample("zonal_table_oldest_generation_in_use"); oldest > gen {
		t.Errorf("zonal_table_oldest_generation_in_use %v is newer than zonal_table_generation %v", oldest, gen)
	}
	if _, ok := f.sample("zonal_peers", "preferred", "false", "zone", "zone-a"); ok {
		t.Error("zonal_peers counts zone-a peers that are not preferred")
	}
	reloads, _ := f.sample("zonal_reloads_total", "result", "success")

	// No ready endpoint in zone-a: the backend falls back to all peers,
	// which a new table says, without a reload.
	c.WriteManifest("services.yaml", metricsManifests(all, func(be *harness.EchoBackend) bool { return be.Zone != "zone-a" })["services.yaml"])
	err = harness.WaitUntil(changeTimeout, 50*time.Millisecond, func() error {
		if f, err = scrapeMetrics(metricsURL); err != nil {
			return err
		}
		return f.check([]metricWant{
			{"zonal_table_generation", nil, atLeast(gen + 1), fmt.Sprintf(">= %v", gen+1)},
			{"zonal_backend_peers", []string{"backend", backend}, eq(1), "1 (the model keeps ready endpoints only)"},
			{"zonal_backend_local_share", []string{"backend", backend}, eq(0), "0"},
			{"zonal_backend_zone_fallback", []string{"backend", backend, "reason", "no ready endpoint in the own zone"}, eq(1), "1"},
		})
	})
	if err != nil {
		t.Fatalf("after the zone-a endpoints became not ready:\n%v", err)
	}
	const m = 20
	for i := range m {
		r := get(t, hc, "http://shop.test/")
		if r.Status != http.StatusOK || r.Backend() != "b1" {
			t.Fatalf("request %d after the change: %s, want 200 from b1 in zone-b", i, describe(r))
		}
	}
	if f, err = scrapeMetrics(metricsURL); err != nil {
		t.Fatal(err)
	}
	err = f.check([]metricWant{
		{"zonal_upstream_picks_total", []string{"backend", backend, "locality", "local"}, eq(n), strconv.Itoa(n)},
		{"zonal_upstream_picks_total", []string{"backend", backend, "locality", "remote"}, eq(m), strconv.Itoa(m)},
		{"zonal_reloads_total", []string{"result", "success"}, eq(reloads), fmt.Sprintf("%v: an endpoint change needs no reload", reloads)},
		{"zonal_peers", []string{"zone", "zone-b", "preferred", "false"}, eq(1), "1"},
	})
	if err != nil {
		t.Errorf("after %d more requests:\n%v", m, err)
	}
	if _, ok := f.sample("zonal_peers", "zone", "zone-a"); ok {
		t.Error("zonal_peers still counts zone-a peers that are not ready")
	}
}
