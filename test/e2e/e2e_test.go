// Package e2e tests the real NGINX with the zonal module on loopback:
// HTTP backends on 127.0.0.x in three zones, endpoint tables published by
// the controller's writer, and requests through NGINX. They need bin/nginx
// (make nginx) and fail without it, unless -short is given.
package e2e

import (
	"fmt"
	"math"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/test/harness"
)

// The backend every dynamic location of these tests names.
const echo = "default-echo-80"

// refusingIP is an address no backend of these tests listens on: peers
// there refuse connections.
const refusingIP = "127.0.0.9"

// setup publishes first (unless nil) into a fresh table directory and then
// starts NGINX on it, so that the workers find a table from their start.
func setup(t testing.TB, cfg harness.Config, first *table.Table) (*harness.Nginx, *harness.Tables) {
	t.Helper()
	harness.NginxPath(t) // fail (or skip) before making anything
	if cfg.TableDir == "" {
		cfg.TableDir = filepath.Join(harness.TempDir(t), "table")
	}
	ts := harness.OpenTables(t, cfg.TableDir)
	if first != nil {
		ts.Publish(first)
	}
	return harness.Start(t, cfg), ts
}

// oneBackend is a table of the echo backend alone, computed for zone-a.
func oneBackend(localShare uint32, spill map[string]uint32, peers ...table.Peer) *table.Table {
	return &table.Table{Zone: "zone-a", Backends: []table.Backend{{
		Name: echo, LocalShare: localShare, Spill: spill, Peers: peers,
	}}}
}

func peers(bs []*harness.Backend, preferred bool) []table.Peer {
	ps := make([]table.Peer, len(bs))
	for i, b := range bs {
		ps[i] = b.Peer(preferred)
	}
	return ps
}

func names(bs ...*harness.Backend) map[string]bool {
	m := make(map[string]bool, len(bs))
	for _, b := range bs {
		m[b.String()] = true
	}
	return m
}

func keys[K comparable, V any](m map[K]V) []K {
	ks := make([]K, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// checkLoad fails the test if any request of res failed.
func checkLoad(t testing.TB, what string, res harness.LoadResult) {
	t.Helper()
	if res.Failed != 0 || res.OK == 0 {
		t.Fatalf("%s: %d of %d requests failed (%d ok), first failures:\n%s",
			what, res.Failed, res.Sent, res.OK, strings.Join(res.Failures, "\n"))
	}
}

// sigmas is how far an observed count may stray from its expectation, in
// binomial standard deviations: at 4 a correct picker fails about once in
// 16,000 checks, so the tests are not flaky, while a wrong split of a few
// per cent still shows at the sample sizes used here.
const sigmas = 4

// expectShare checks that got of n trials is consistent with probability p.
func expectShare(t testing.TB, what string, got, n int, p float64) {
	t.Helper()
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	tol := sigmas * sd
	if p == 0 || p == 1 {
		tol = 0
	}
	if math.Abs(float64(got)-mean) > tol {
		t.Errorf("%s: %d of %d (%.2f %%), want %.2f %% ± %.2f %% (%d sigma)",
			what, got, n, 100*float64(got)/float64(n), 100*p, 100*tol/float64(n), sigmas)
	} else {
		t.Logf("%s: %d of %d (%.2f %%), want %.2f %% ± %.2f %%",
			what, got, n, 100*float64(got)/float64(n), 100*p, 100*tol/float64(n))
	}
}

// logLine matches an NGINX error log line: its level and the pid of the
// process that wrote it.
var logLine = regexp.MustCompile(`^\S+ \S+ \[(\w+)\] (\d+)#\d+: (.*)$`)

// refusals maps generation → worker pid → number of "refused endpoint
// table" lines in log.
func refusals(t testing.TB, log string) map[uint64]map[int]int {
	t.Helper()
	gen := regexp.MustCompile(`refused endpoint table .* for generation (\d+):`)
	out := map[uint64]map[int]int{}
	for _, line := range harness.Grep(log, "refused endpoint table") {
		m := logLine.FindStringSubmatch(line)
		g := gen.FindStringSubmatch(line)
		if m == nil || g == nil {
			t.Errorf("unexpected log line: %s", line)
			continue
		}
		pid, _ := strconv.Atoi(m[2])
		n, _ := strconv.ParseUint(g[1], 10, 64)
		if out[n] == nil {
			out[n] = map[int]int{}
		}
		out[n][pid]++
	}
	return out
}

// sequential sends count requests for path, each on a new connection so
// that they spread over the workers, and returns the answers. It fails the
// test on a transport error.
func sequential(t testing.TB, c *harness.Client, path string, count int) []harness.Response {
	t.Helper()
	out := make([]harness.Response, 0, count)
	for range count {
		out = append(out, c.MustGet(t, path))
	}
	return out
}

// untilBothWorkers sends requests on new connections, up to max of them,
// until every worker of n has answered at least min times in all, and
// returns the answers.
func untilBothWorkers(t testing.TB, n *harness.Nginx, c *harness.Client, path string, min, max int) []harness.Response {
	t.Helper()
	seen := map[int]bool{}
	var out []harness.Response
	for len(out) < max && (len(out) < min || len(seen) < n.Workers) {
		r := c.MustGet(t, path)
		seen[r.Worker] = true
		out = append(out, r)
	}
	if len(seen) < n.Workers {
		t.Errorf("only workers %v answered %d requests on new connections; want all %d workers",
			keys(seen), len(out), n.Workers)
	}
	return out
}

func workersOf(rs []harness.Response) []int {
	var ws []int
	for _, r := range rs {
		if !slices.Contains(ws, r.Worker) {
			ws = append(ws, r.Worker)
		}
	}
	slices.Sort(ws)
	return ws
}

func describe(r harness.Response) string {
	return fmt.Sprintf("status %d, peer %q, worker %d, body %.100q", r.Status, r.Peer, r.Worker, r.Body)
}
