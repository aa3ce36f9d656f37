package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/test/harness"
)

// A new generation takes effect on the very next request, in every worker
// and on connections opened before the publish, and without a reload: the
// master and the workers are the same processes afterwards.
func TestNewGenerationOnNextRequestWithoutReload(t *testing.T) {
	t.Parallel()
	first := harness.StartBackend(t, "127.0.0.2", "zone-a")
	second := harness.StartBackend(t, "127.0.0.3", "zone-b")
	n, ts := setup(t, harness.Config{}, oneBackend(table.ShareOne, nil, first.Peer(true)))
	master, workers := n.MasterPID(), n.WorkerPIDs()

	fresh := n.Client(false)
	kept := n.Client(true)
	for _, r := range untilBothWorkers(t, n, fresh, "/b/"+echo, 10, 200) {
		if r.Status != 200 || r.Peer != first.String() {
			t.Fatalf("before the switch: %s, want 200 from %s", describe(r), first)
		}
	}
	if r := kept.MustGet(t, "/b/"+echo); r.Peer != first.String() {
		t.Fatalf("before the switch, on a kept-alive connection: %s", describe(r))
	}

	// Back and forth, so that a worker that happened to stay on an old
	// snapshot would show.
	for round, b := range []*harness.Backend{second, first, second} {
		gen := ts.Publish(oneBackend(table.ShareOne, nil, b.Peer(true)))
		if r := kept.MustGet(t, "/b/"+echo); r.Status != 200 || r.Peer != b.String() {
			t.Errorf("round %d, generation %d: first request on a kept-alive connection: %s, want 200 from %s",
				round, gen, describe(r), b)
		}
		rs := untilBothWorkers(t, n, fresh, "/b/"+echo, 10, 200)
		for i, r := range rs {
			if r.Status != 200 || r.Peer != b.String() {
				t.Errorf("round %d, generation %d: request %d after the publish: %s, want 200 from %s",
					round, gen, i, describe(r), b)
			}
		}
		t.Logf("generation %d: %d requests on new connections, workers %v, all from %s", gen, len(rs), workersOf(rs), b)
	}

	if got := n.MasterPID(); got != master {
		t.Errorf("master pid %d became %d", master, got)
	}
	if got := n.WorkerPIDs(); !slices.Equal(got, workers) {
		t.Errorf("worker pids %v became %v: NGINX reloaded or a worker died", workers, got)
	}
	if lines := n.ErrorLines("reconfiguring", "signal process started", "exited"); len(lines) > 0 {
		t.Errorf("error log shows a reload or a worker exit:\n%s", strings.Join(lines, "\n"))
	}
}

// A damaged snapshot is refused, logged once per generation by each worker
// that meets it, and traffic keeps flowing on the last good table; the next
// good publish is taken up again.
func TestDamagedSnapshotRefused(t *testing.T) {
	t.Parallel()
	setA := harness.StartBackends(t, "zone-a", "127.0.0.2", "127.0.0.3")
	setB := harness.StartBackends(t, "zone-b", "127.0.0.4")
	never := harness.StartBackend(t, "127.0.0.5", "zone-c") // only in damaged snapshots
	tableOf := func(bs []*harness.Backend) *table.Table { return oneBackend(table.ShareOne, nil, peers(bs, true)...) }
	n, ts := setup(t, harness.Config{}, tableOf(setA))
	fresh := n.Client(false)
	kept := n.Client(true)

	// Every damaged snapshot would send traffic to never, were it taken.
	damaged := tableOf([]*harness.Backend{never})
	rng := rand.New(rand.NewPCG(1, 2))
	variants := []struct {
		name  string
		bytes func(gen uint64) []byte
	}{
		{"truncated", func(gen uint64) []byte {
			b := harness.Encode(t, damaged, gen)
			return b[:len(b)/2]
		}},
		{"bad checksum", func(gen uint64) []byte {
			b := harness.Encode(t, damaged, gen)
			b[len(b)-1] ^= 0x20
			return b
		}},
		{"header only", func(gen uint64) []byte {
			return harness.Encode(t, damaged, gen)[:96]
		}},
		{"garbage", func(uint64) []byte {
			b := make([]byte, 4096)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			return b
		}},
		{"empty file", func(uint64) []byte { return []byte{} }},
		{"missing file", func(uint64) []byte { return nil }},
	}

	good, other := setA, setB
	for _, v := range variants {
		off := n.ErrorLogSize()
		gen := ts.InstallRaw(v.bytes(ts.Generation() + 1))
		want := names(good...)

		// Requests keep flowing on the last good table, in every worker.
		rs := untilBothWorkers(t, n, fresh, "/b/"+echo, 20, 200)
		rs = append(rs, kept.MustGet(t, "/b/"+echo))
		for _, r := range rs {
			if r.Status != 200 || !want[r.Peer] {
				t.Errorf("%s (generation %d): %s, want 200 from the last good table %v", v.name, gen, describe(r), keys(want))
			}
		}
		if never.Requests() != 0 {
			t.Fatalf("%s: the damaged snapshot was taken: %s answered %d requests", v.name, never, never.Requests())
		}

		// Logged once per worker that met the generation, not per request.
		log := n.ErrorLogSince(off)
		refused := refusals(t, log)
		for g := range refused {
			if g != gen {
				t.Errorf("%s: refusal logged for generation %d, only %d was damaged:\n%s", v.name, g, gen, log)
			}
		}
		var loggers []int
		for pid, count := range refused[gen] {
			loggers = append(loggers, pid)
			if count != 1 {
				t.Errorf("%s: worker %d logged the refusal of generation %d %d times, want once:\n%s", v.name, pid, gen, count, log)
			}
		}
		slices.Sort(loggers)
		if served := workersOf(rs); !slices.Equal(loggers, served) {
			t.Errorf("%s: workers %v logged the refusal of generation %d, want exactly the workers that served since, %v:\n%s",
				v.name, loggers, gen, served, log)
		}
		t.Logf("%s: generation %d refused by workers %v over %d requests: %s",
			v.name, gen, loggers, len(rs), strings.TrimSpace(harness.Grep(log, "refused")[0]))

		// A good publish is taken up again.
		good, other = other, good
		gen = ts.Publish(tableOf(good))
		want = names(good...)
		for _, r := range untilBothWorkers(t, n, fresh, "/b/"+echo, 10, 200) {
			if r.Status != 200 || !want[r.Peer] {
				t.Errorf("after %s, good generation %d: %s, want 200 from %v", v.name, gen, describe(r), keys(want))
			}
		}
		if r := kept.MustGet(t, "/b/"+echo); r.Status != 200 || !want[r.Peer] {
			t.Errorf("after %s, good generation %d, kept-alive connection: %s", v.name, gen, describe(r))
		}
	}
}

// Publishing 1,000 generations while clients keep sending requests fails
// none of them: every snapshot switch happens under requests in flight.
func TestChurnUnderLoad(t *testing.T) {
	t.Parallel()
	const generations = 1000
	a := harness.StartBackends(t, "zone-a", "127.0.0.2", "127.0.0.3")
	b := harness.StartBackend(t, "127.0.0.4", "zone-b")
	c := harness.StartBackend(t, "127.0.0.5", "zone-c")
	live := names(append(a, b, c)...)

	// Peer sets the generations cycle through, over live backends only.
	sets := []*table.Table{
		oneBackend(table.ShareOne, nil, a[0].Peer(true), a[1].Peer(true), b.Peer(false)),
		oneBackend(0, nil, b.Peer(false), c.Peer(false)),
		oneBackend(5000, map[string]uint32{"zone-b": 1, "zone-c": 3}, a[1].Peer(true), b.Peer(false), c.Peer(false)),
		oneBackend(table.ShareOne, nil, c.Peer(true)),
		oneBackend(7000, nil, a[0].WeightedPeer(3, true), c.WeightedPeer(2, false)),
	}
	// Other backends beside it, so that each snapshot has some size.
	for _, s := range sets {
		for i := range 200 {
			s.Backends = append(s.Backends, table.Backend{
				Name: fmt.Sprintf("default-filler%03d-80", i), LocalShare: table.ShareOne,
				Peers: []table.Peer{a[i%2].Peer(true), b.Peer(false), c.Peer(false)},
			})
		}
	}
	n, ts := setup(t, harness.Config{}, sets[0])
	first := ts.Generation()

	done := make(chan struct{})
	published := make(chan int, 1)
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		count := 0
		for i := range generations {
			if ctx.Err() != nil {
				break
			}
			if _, err := ts.Publisher().Publish(sets[(i+1)%len(sets)]); err != nil {
				t.Errorf("publishing generation %d: %v", i, err)
				break
			}
			count++
			// A short pause lets requests interleave with the switches.
			time.Sleep(time.Millisecond)
		}
		published <- count
	}()

	res := n.Run(harness.Load{
		Path: "/b/" + echo, Requests: 1_000_000, Clients: 4,
		MaxDuration: 60 * time.Second, Stop: done,
		Check: func(r harness.Response) error {
			if !live[r.Peer] {
				return fmt.Errorf("answer from %q, not a live backend", r.Peer)
			}
			return nil
		},
	})
	<-done
	count := <-published
	last := ts.Generation()
	t.Logf("%d generations (%d to %d) published in %v while %d requests were served (%d failed), by worker %v, by peer %v",
		count, first+1, last, res.Elapsed.Round(time.Millisecond), res.OK, res.Failed, res.ByWorker, res.ByPeer)
	checkLoad(t, "churn", res)
	if count != generations {
		t.Errorf("published %d generations, want %d", count, generations)
	}
	if lines := n.ErrorLines("refused endpoint table", "[error]", "[crit]"); len(lines) > 0 {
		t.Errorf("errors while publishing good tables:\n%s", strings.Join(lines[:min(len(lines), 10)], "\n"))
	}

	// The access log reads $upstream_addr after the upstream is done, maybe
	// after its snapshot was replaced: it must still name a live peer.
	entries := n.WaitAccessLog(res.Sent, 10*time.Second)
	bad := 0
	for _, e := range entries {
		if e.Status != 200 || !live[e.UpstreamAddr] {
			if bad++; bad <= 5 {
				t.Errorf("access log line %q: want status 200 and one live peer", e.Raw)
			}
		}
	}
	if len(entries) != res.Sent {
		t.Errorf("access log has %d lines for %d requests", len(entries), res.Sent)
	}
}

// With no table at startup the dynamic locations answer 503 and NGINX
// keeps running; the first publish brings them up without a reload.
func TestNoTableAtStartup(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		openBefore bool // the publisher made the control file before NGINX started
	}{
		"no table directory":            {openBefore: false},
		"control file but no table yet": {openBefore: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			backend := harness.StartBackend(t, "127.0.0.2", "zone-a")
			dir := filepath.Join(harness.TempDir(t), "table")
			var ts *harness.Tables
			if tc.openBefore {
				ts = harness.OpenTables(t, dir)
			}
			n := harness.Start(t, harness.Config{TableDir: dir})
			master, workers := n.MasterPID(), n.WorkerPIDs()
			fresh := n.Client(false)

			for _, r := range untilBothWorkers(t, n, fresh, "/b/"+echo, 10, 200) {
				if r.Status != 503 {
					t.Fatalf("before any table: %s, want 503", describe(r))
				}
			}
			if lines := n.ErrorLines("no endpoint table loaded"); len(lines) == 0 {
				t.Errorf("no error log line says that the table is missing; log:\n%s", n.ErrorLog())
			}

			if ts == nil {
				ts = harness.OpenTables(t, dir)
			}
			gen := ts.Publish(oneBackend(table.ShareOne, nil, backend.Peer(true)))

			// A worker that found no control file looks again once a
			// second: wait (boundedly) until every worker serves.
			deadline := time.Now().Add(15 * time.Second)
			ok := map[int]bool{}
			for len(ok) < n.Workers && time.Now().Before(deadline) {
				r := fresh.MustGet(t, "/b/"+echo)
				switch {
				case r.Status == 200 && r.Peer == backend.String():
					ok[r.Worker] = true
				case r.Status == 503 && !ok[r.Worker]:
					time.Sleep(20 * time.Millisecond)
				default:
					t.Fatalf("after publishing generation %d: %s", gen, describe(r))
				}
			}
			if len(ok) < n.Workers {
				t.Fatalf("15 s after publishing generation %d only workers %v serve it", gen, keys(ok))
			}
			if n.MasterPID() != master || !slices.Equal(n.WorkerPIDs(), workers) {
				t.Errorf("processes changed: master %d → %d, workers %v → %v", master, n.MasterPID(), workers, n.WorkerPIDs())
			}
		})
	}
}
