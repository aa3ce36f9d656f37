package e2e

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/test/harness"
)

// BenchmarkPublishToFirstRequest measures how long an endpoint change takes
// to reach traffic: from the call of Publish for a table whose only peer is
// another backend to the first response from that backend, on a kept-alive
// client connection that sends requests back to back. It reports the
// median and the 99th percentile in µs (DESIGN.md: p99 ≤ 10 ms; the aim is
// well under 1 ms), and the median of Publish alone, the rest being one
// request through NGINX (the worker maps the new snapshot on its way). The other backends in the table make the snapshot the
// worker maps and validates bigger.
func BenchmarkPublishToFirstRequest(b *testing.B) {
	for _, others := range []int{0, 1000} {
		b.Run(fmt.Sprintf("other-backends=%d", others), func(b *testing.B) {
			x := harness.StartBackend(b, "127.0.0.2", "zone-a")
			y := harness.StartBackend(b, "127.0.0.3", "zone-a")
			tableOf := func(to *harness.Backend) *table.Table {
				t := oneBackend(table.ShareOne, nil, to.Peer(true))
				for i := range others {
					t.Backends = append(t.Backends, table.Backend{
						Name: fmt.Sprintf("default-other%05d-80", i), LocalShare: table.ShareOne,
						Peers: []table.Peer{x.Peer(true), y.Peer(false)},
					})
				}
				return t
			}
			// Alternate between the two, prebuilt: the measurement is
			// Publish and what follows, not building the table.
			targets := []*harness.Backend{y, x}
			tables := []*table.Table{tableOf(y), tableOf(x)}
			n, ts := setup(b, harness.Config{}, tableOf(x))
			pub := ts.Publisher()
			c := n.Client(true)
			if r := c.MustGet(b, "/b/"+echo); r.Status != 200 || r.Peer != x.String() {
				b.Fatalf("before the first publish: %s", describe(r))
			}

			var (
				lat      []time.Duration // Publish called → first answer from the new peer
				pubLat   []time.Duration // of which in Publish
				requests int
				i        int
			)
			for b.Loop() {
				target := targets[i%2].String()
				start := time.Now()
				if _, err := pub.Publish(tables[i%2]); err != nil {
					b.Fatal(err)
				}
				pubLat = append(pubLat, time.Since(start))
				for tries := 1; ; tries++ {
					r, err := c.Get("/b/" + echo)
					if err != nil {
						b.Fatal(err)
					}
					requests++
					if r.Status == 200 && r.Peer == target {
						break
					}
					if tries == 1000 {
						b.Fatalf("1000 requests after the publish, still %s, want %s", describe(r), target)
					}
				}
				lat = append(lat, time.Since(start))
				i++
			}
			slices.Sort(lat)
			slices.Sort(pubLat)
			us := func(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
			pct := func(ds []time.Duration, p int) time.Duration { return ds[(len(ds)*p+99)/100-1] }
			b.ReportMetric(us(pct(lat, 50)), "p50-µs")
			b.ReportMetric(us(pct(lat, 99)), "p99-µs")
			b.ReportMetric(us(lat[len(lat)-1]), "max-µs")
			b.ReportMetric(us(pct(pubLat, 50)), "publish-p50-µs")
			b.ReportMetric(float64(requests)/float64(len(lat)), "requests/op")
		})
	}
}
