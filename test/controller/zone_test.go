package controller

import (
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/test/harness"
)

// zoneBackends are two echo backends in each of zone-a, zone-b and zone-c,
// on 127.0.0.<first>...<first+5>; the controller runs in zone-a.
func zoneBackends(t *testing.T, first int) []*harness.EchoBackend {
	t.Helper()
	var bs []*harness.EchoBackend
	for i, zone := range []string{"zone-a", "zone-a", "zone-b", "zone-b", "zone-c", "zone-c"} {
		ip := fmt.Sprintf("127.0.0.%d", first+i)
		bs = append(bs, harness.StartEchoBackend(t, fmt.Sprintf("%s-%d", zone, i%2), ip, zone))
	}
	return bs
}

// zoneSlice is an EndpointSlice of Service web with one endpoint, in its
// backend's zone, hinted for hints (none when empty).
func zoneSlice(b *harness.EchoBackend, hints ...string) string {
	s := fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-%s
  namespace: shop
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- name: http
  port: %d
endpoints:
- addresses: [%q]
  conditions: {ready: true}
  zone: %s
`, strings.ReplaceAll(b.IP(), ".", "-"), b.Port(), b.IP(), b.Zone)
	if len(hints) > 0 {
		s += "  hints:\n    forZones:\n"
		for _, z := range hints {
			s += fmt.Sprintf("    - name: %s\n", z)
		}
	}
	return s
}

// zoneService is Service web with the given extra spec and annotations
// lines, and an Ingress for host zones.test that routes / to it.
func zoneService(spec, annotations string) string {
	return docs(ingressClass, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  annotations: {%s}
spec:
  ports:
  - name: http
    port: 80
    targetPort: 8080
%s`, annotations, spec), `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
  namespace: shop
spec:
  ingressClassName: zonal
  rules:
  - host: zones.test
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service: {name: web, port: {name: http}}
`)
}

// byZone sends n requests over four keep-alive connections and counts the
// answers by the backend's zone; any failure fails the test.
func byZone(t *testing.T, c *harness.Controller, n int) map[string]int {
	t.Helper()
	const clients = 4
	counts := map[string]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var failures []string
	deadline := time.Now().Add(60 * time.Second)
	for k := range clients {
		hc := c.Client(harness.ClientOptions{KeepAlive: true})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := k; i < n && time.Now().Before(deadline); i += clients {
				r, err := harness.Get(hc, "http://zones.test/")
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case r.Status != http.StatusOK:
					failures = append(failures, describe(r))
				default:
					e, err := r.Echo()
					if err != nil {
						failures = append(failures, err.Error())
					} else {
						counts[e.Zone]++
					}
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		t.Fatalf("%d requests failed, first: %s", len(failures), failures[0])
	}
	return counts
}

// waitLocalFraction waits until about want of the requests (within 30
// points, over 40 requests) are answered in zone-a: local mode takes up to
// a second to see a file change.
func waitLocalFraction(t *testing.T, c *harness.Controller, want float64) {
	t.Helper()
	err := harness.WaitUntil(changeTimeout, 50*time.Millisecond, func() error {
		counts := byZone(t, c, 40)
		if got := float64(counts["zone-a"]) / 40; math.Abs(got-want) > 0.3 {
			return fmt.Errorf("zone-a answered %.0f %% of 40 requests, want about %.0f %%", 100*got, 100*want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Where the requests of an ingress pod in zone-a go, per zone mode, with
// two endpoints in each of three zones: the fraction answered in zone-a
// is within 2 percentage points of what the mode promises, over 6,000
// requests (the binomial standard deviation is at most 0.65 points).
func TestZoneModesKeepTheExpectedShareLocal(t *testing.T) {
	bs := zoneBackends(t, 61)
	plainSlices := make([]string, len(bs))
	hintedSlices := make([]string, len(bs))
	for i, b := range bs {
		plainSlices[i] = zoneSlice(b)
		hintedSlices[i] = zoneSlice(b, b.Zone)
	}
	partialHints := append([]string{zoneSlice(bs[0])}, hintedSlices[1:]...)

	tests := map[string]struct {
		args       []string
		service    string
		slices     []string
		wantLocal  float64
		wantByZone map[string]float64 // the other zones, when they matter
	}{
		"off spreads over every zone": {
			args: []string{"--zone-mode", "off"}, service: zoneService("", ""), slices: plainSlices,
			wantLocal: 1.0 / 3,
		},
		"local keeps everything in zone-a": {
			args: []string{"--zone-mode", "local"}, service: zoneService("", ""), slices: plainSlices,
			wantLocal: 1,
		},
		"a Service annotation overrides the mode": {
			args:    []string{"--zone-mode", "off"},
			service: zoneService("", `zonal.dev/zone-mode: local`), slices: plainSlices,
			wantLocal: 1,
		},
		"auto follows hints when trafficDistribution asks": {
			args:    []string{"--zone-mode", "auto"},
			service: zoneService("  trafficDistribution: PreferClose\n", ""), slices: hintedSlices,
			wantLocal: 1,
		},
		"auto is off when the Service asks for nothing": {
			args: []string{"--zone-mode", "auto"}, service: zoneService("", ""), slices: hintedSlices,
			wantLocal: 1.0 / 3,
		},
		"hints with an endpoint lacking hints fall back to all": {
			args: []string{"--zone-mode", "hints"}, service: zoneService("", ""), slices: partialHints,
			wantLocal: 1.0 / 3,
		},
		"balanced spills what zone-a cannot carry": {
			// Capacity a third per zone; half the replicas in zone-a: it
			// keeps (1/3)/(1/2) = 2/3, and zone-b and zone-c, each with
			// 1/3 - 1/4 of spare capacity, share the rest evenly.
			args:    []string{"--zone-mode", "balanced", "--zone-replicas", "zone-a=2;zone-b=1;zone-c=1"},
			service: zoneService("", ""), slices: plainSlices,
			wantLocal: 2.0 / 3, wantByZone: map[string]float64{"zone-b": 1.0 / 6, "zone-c": 1.0 / 6},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := start(t, tc.args, manifests{
				"web.yaml":    tc.service,
				"slices.yaml": docs(tc.slices...),
			})
			const n = 6000
			counts := byZone(t, c, n)
			t.Logf("by zone: %v", counts)
			check := func(zone string, want float64) {
				got := float64(counts[zone]) / n
				if math.Abs(got-want) > 0.02 {
					t.Errorf("%s answered %.2f %% of %d requests, want %.2f %% ± 2", zone, 100*got, n, 100*want)
				}
			}
			check("zone-a", tc.wantLocal)
			for zone, want := range tc.wantByZone {
				check(zone, want)
			}
		})
	}
}

// In local mode, removing every zone-a endpoint sends traffic to the other
// zones without a failed request, and bringing them back returns it.
func TestLocalEndpointsRemovedAndBackWithoutFailures(t *testing.T) {
	bs := zoneBackends(t, 71)
	var local, remote []string
	for _, b := range bs {
		if b.Zone == "zone-a" {
			local = append(local, zoneSlice(b))
		} else {
			remote = append(remote, zoneSlice(b))
		}
	}
	c := start(t, []string{"--zone-mode", "local"}, manifests{
		"web.yaml":    zoneService("", ""),
		"zone-a.yaml": docs(local...),
		"remote.yaml": docs(remote...),
	})
	waitLocalFraction(t, c, 1)

	load := startLoad(c, "http://zones.test/", 4, true, func(string) bool { return true })
	c.RemoveManifest("zone-a.yaml")
	waitLocalFraction(t, c, 0)
	c.WriteManifest("zone-a.yaml", docs(local...))
	waitLocalFraction(t, c, 1)
	load.finish(t, "zone-a endpoints removed and restored")
}
