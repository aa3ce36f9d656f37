package controllerbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/zonal-ingress/zonal/controller/model"
	"github.com/zonal-ingress/zonal/controller/nginx"
	"github.com/zonal-ingress/zonal/controller/zone"
	"github.com/zonal-ingress/zonal/test/harness"
)

// BenchmarkModelAndRender is the work of one sync pass on the big cluster
// (5,000 Ingresses, 10,000 Services, 100,000 endpoints), step by step:
// model.Build, zone.Table, comparing the table with the previous one (as
// the loop does, with table.Equal) and nginx.Render. Target (DESIGN.md):
// model rebuild ≤ 200 ms.
func BenchmarkModelAndRender(b *testing.B) {
	snap := snapshotOf(generate(bigIngresses, bigServices, perService, bigNodes))
	opts := model.Options{
		IngressClass:          "zonal",
		ControllerClass:       "zonal.dev/ingress-controller",
		DefaultBackendService: types.NamespacedName{Namespace: "ns-0", Name: "svc-0"},
		Certificates:          &model.CertCache{},
	}
	settings := nginx.Settings{
		RuntimeDir: b.TempDir(), BindAddress: "127.0.0.1",
		HTTPPort: 8080, HTTPSPort: 8443, WorkerProcesses: 1,
	}
	policy := zone.Policy{Zone: "zone-a", Mode: zone.ModeAuto}
	prev, _ := zone.Table(model.Build(snap, opts), policy)

	var build, table, compare, render time.Duration
	var m *model.Model
	var conf []byte
	for b.Loop() {
		t0 := time.Now()
		m = model.Build(snap, opts)
		t1 := time.Now()
		t, _ := zone.Table(m, policy)
		t2 := time.Now()
		if !t.Equal(prev) {
			b.Fatal("the same snapshot gave another table")
		}
		t3 := time.Now()
		var err error
		conf, err = nginx.Render(m, settings)
		if err != nil {
			b.Fatal(err)
		}
		t4 := time.Now()
		build += t1.Sub(t0)
		table += t2.Sub(t1)
		compare += t3.Sub(t2)
		render += t4.Sub(t3)
	}
	n := float64(b.N)
	ms := func(d time.Duration) float64 { return float64(d) / n / float64(time.Millisecond) }
	b.ReportMetric(ms(build), "build-ms")
	b.ReportMetric(ms(table), "table-ms")
	b.ReportMetric(ms(compare), "compare-ms")
	b.ReportMetric(ms(render), "render-ms")
	b.ReportMetric(float64(len(conf))/(1<<20), "conf-MB")
	locations := 0
	for _, s := range m.Servers {
		locations += len(s.Locations)
	}
	b.Logf("model: %d servers, %d locations, %d backends, %d problems; nginx.conf %d bytes; per pass: build %.1f ms, zone table %.1f ms, table compare %.1f ms, render %.1f ms",
		len(m.Servers), locations, len(m.Backends), len(m.Problems), len(conf), ms(build), ms(table), ms(compare), ms(render))
}

// BenchmarkControllerMemory runs controller.Run in this process on a fake
// API server preloaded with the big cluster, with a real NGINX, and
// reports its memory once it serves: the Go heap in use and the process's
// RSS, both with and without the fake API server's own copy of the
// objects (measured before the controller started), and NGINX's RSS.
// Then it moves the probe Service's one endpoint a few times and reports
// the time to the first request on the new endpoint, and the sync passes'
// durations, at this size.
func BenchmarkControllerMemory(b *testing.B) {
	harness.NginxPath(b)
	backends := harness.StartBackends(b, "zone-a", "127.0.0.51", "127.0.0.52")
	objs := append(generate(bigIngresses, bigServices, perService, bigNodes), probe(backends[0].Addr)...)
	client := fake.NewSimpleClientset(objs...)
	objs = nil
	runtime.GC()
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	rssBefore := vmRSS(0)

	p := startController(b, client, "")
	ready := p.Ready.Sub(p.Started)
	runtime.GC()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	rssAfter := vmRSS(0)
	master := p.Running.NGINX.MasterPID()
	nginxRSS, nginxPSS := vmRSS(master), pss(master)
	for _, w := range harness.Children(master) {
		nginxRSS += vmRSS(w)
		nginxPSS += pss(w)
	}
	mb := func(v int64) float64 { return float64(v) / (1 << 20) }
	b.ReportMetric(mb(int64(after.HeapInuse)), "heap-inuse-MB")
	b.ReportMetric(mb(int64(after.HeapInuse)-int64(before.HeapInuse)), "heap-controller-MB")
	b.ReportMetric(mb(rssAfter), "rss-MB")
	b.ReportMetric(mb(rssAfter-rssBefore), "rss-controller-MB")
	b.ReportMetric(mb(nginxRSS), "nginx-rss-MB")
	b.ReportMetric(mb(nginxPSS), "nginx-pss-MB")
	b.ReportMetric(ready.Seconds(), "start-to-ready-s")
	first := p.Passes()[0]
	b.ReportMetric(float64(first.Took)/float64(time.Millisecond), "first-pass-ms")
	b.Logf("fake API server holds the objects: heap in use %.0f MB, RSS %.0f MB", mb(int64(before.HeapInuse)), mb(rssBefore))
	b.Logf("controller serving after %v (first pass %v): heap in use %.0f MB (+%.0f MB), RSS %.0f MB (+%.0f MB); NGINX master and worker: RSS %.0f MB, PSS %.0f MB",
		ready.Round(time.Millisecond), first.Took.Round(time.Millisecond), mb(int64(after.HeapInuse)),
		mb(int64(after.HeapInuse)-int64(before.HeapInuse)), mb(rssAfter), mb(rssAfter-rssBefore), mb(nginxRSS), mb(nginxPSS))

	pr := newProber(p.Addr)
	defer pr.close()
	if _, _, err := pr.waitPeer(backends[0].String(), 10*time.Second, nil); err != nil {
		b.Fatal(err)
	}
	version := 100 // the slice's resourceVersion, new on every update
	update := func(_ int, to *harness.Backend) error {
		version++
		_, err := client.DiscoveryV1().EndpointSlices("bench").Update(context.Background(),
			probeSlice(to.Addr, version), meta_v1.UpdateOptions{})
		return err
	}
	// Each update once the pass of the one before has finished, then
	// back to back: the next update as soon as the new endpoint answered,
	// while the pass that published it still renders nginx.conf.
	for _, mode := range []struct {
		name string
		idle bool
	}{{"idle", true}, {"back-to-back", false}} {
		nPasses := len(p.Passes())
		lat, pub := endpointUpdates(b, pr, p, backends, 10, mode.idle, update)
		took, reloads := tookOf(p.Passes()[nPasses:])
		b.Logf("%s", percentiles(b, mode.name+"-update-to-request", lat))
		b.Logf("%s", percentiles(b, mode.name+"-update-to-publish", pub))
		b.Logf("%s; reloads %d", percentiles(b, mode.name+"-pass", took), reloads)
	}
}

// BenchmarkEndpointToFirstRequest measures, on a small cluster (one
// Ingress, one Service, one endpoint) behind a fake API server, the time
// from just before an EndpointSlice Update to the first response from the
// new endpoint, with one keep-alive client polling. Every iteration moves
// the endpoint to the other of two backends. Target (DESIGN.md): p99 ≤ 10
// ms, and no reload.
func BenchmarkEndpointToFirstRequest(b *testing.B) {
	harness.NginxPath(b)
	backends := harness.StartBackends(b, "zone-a", "127.0.0.53", "127.0.0.54")
	objs := append(generate(0, 0, 0, 3), probe(backends[0].Addr)...)
	client := fake.NewSimpleClientset(objs...)
	p := startController(b, client, "")
	pr := newProber(p.Addr)
	defer pr.close()
	if _, _, err := pr.waitPeer(backends[0].String(), 10*time.Second, nil); err != nil {
		b.Fatal(err)
	}
	nPasses := len(p.Passes())
	reloadsBefore := p.Running.NGINX.Reloads()
	lat, pub := endpointUpdates(b, pr, p, backends, 0, true, func(i int, to *harness.Backend) error {
		_, err := client.DiscoveryV1().EndpointSlices("bench").Update(context.Background(),
			probeSlice(to.Addr, 100+i), meta_v1.UpdateOptions{})
		return err
	})
	took, _ := tookOf(p.Passes()[nPasses:])
	reloads := p.Running.NGINX.Reloads() - reloadsBefore
	b.ReportMetric(float64(reloads), "reloads")
	b.Logf("%s", percentiles(b, "update-to-request", lat))
	b.Logf("%s", percentiles(b, "update-to-publish", pub))
	b.Logf("%s; NGINX reloads %d", percentiles(b, "pass", took), reloads)
}

// BenchmarkEndpointToFirstRequestFile is the same through local mode: the
// EndpointSlice's manifest file is rewritten (atomically, as editors
// save). Local mode looks at the files every 500 ms and reads a file once
// it has been left alone for 100 ms, so expect 0.1-0.6 s: the figure is
// the poll interval, not the controller. It runs a fixed 10 updates
// (ZONAL_BENCH_FILE_UPDATES overrides).
func BenchmarkEndpointToFirstRequestFile(b *testing.B) {
	harness.NginxPath(b)
	backends := harness.StartBackends(b, "zone-a", "127.0.0.55", "127.0.0.56")
	dir := b.TempDir()
	write := func(name, content string) {
		tmp := filepath.Join(dir, "."+name+".tmp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			b.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
			b.Fatal(err)
		}
	}
	write("ingress.yaml", fileManifests)
	write("slice.yaml", fileSlice(backends[0], 0))
	p := startController(b, nil, dir)
	pr := newProber(p.Addr)
	defer pr.close()
	if _, _, err := pr.waitPeer(backends[0].String(), 10*time.Second, nil); err != nil {
		b.Fatal(err)
	}
	n := 10
	if s := os.Getenv("ZONAL_BENCH_FILE_UPDATES"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	nPasses := len(p.Passes())
	lat, pub := endpointUpdates(b, pr, p, backends, n, true, func(i int, to *harness.Backend) error {
		write("slice.yaml", fileSlice(to, i+1))
		return nil
	})
	took, reloads := tookOf(p.Passes()[nPasses:])
	b.Logf("%s", percentiles(b, "file-to-request", lat))
	b.Logf("%s", percentiles(b, "file-to-publish", pub))
	b.Logf("%s; reloads %d", percentiles(b, "pass", took), reloads)
}

// endpointUpdates moves the probe Service's endpoint to the other backend
// with update, n times (0: as b.Loop decides), and returns the times from
// just before each update to the first answer from the new backend, and to
// the new table's generation in the control file (as seen by the polling
// client, between its requests). With idle, each update waits until the
// sync pass of the one before has finished.
func endpointUpdates(b *testing.B, pr *prober, p *inProcess, backends []*harness.Backend, n int, idle bool, update func(i int, to *harness.Backend) error) (lat, pub []time.Duration) {
	step := func(i int) {
		to := backends[(i+1)%2]
		passes := len(p.Passes())
		start := time.Now()
		if err := update(i, to); err != nil {
			b.Fatal(err)
		}
		served, published, err := pr.waitPeer(to.String(), 10*time.Second, p.Generation)
		if err != nil {
			b.Fatalf("update %d: %v", i, err)
		}
		lat = append(lat, served.Sub(start))
		if !published.IsZero() {
			pub = append(pub, published.Sub(start))
		}
		for idle && len(p.Passes()) == passes && time.Since(served) < 10*time.Second {
			time.Sleep(time.Millisecond)
		}
	}
	if n == 0 {
		for i := 0; b.Loop(); i++ {
			step(i)
		}
	} else {
		for i := range n {
			step(i)
		}
	}
	return lat, pub
}

const fileManifests = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: zonal
spec:
  controller: zonal.dev/ingress-controller
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: probe
  namespace: bench
spec:
  ingressClassName: zonal
  rules:
  - host: probe.test
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: probe
            port:
              number: 80
---
apiVersion: v1
kind: Service
metadata:
  name: probe
  namespace: bench
spec:
  ports:
  - name: http
    port: 80
    targetPort: 8080
`

// fileSlice is the probe Service's EndpointSlice pointing at be; version
// goes into a label so that every write changes the file.
func fileSlice(be *harness.Backend, version int) string {
	return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: probe-0
  namespace: bench
  labels:
    kubernetes.io/service-name: probe
    bench/version: "%d"
addressType: IPv4
ports:
- name: http
  port: %d
endpoints:
- addresses: ["%s"]
  zone: zone-a
`, version, be.Addr.Port(), be.Addr.Addr())
}
