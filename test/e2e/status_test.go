package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/test/harness"
)

// status is the JSON of the zonal_status location.
type status struct {
	Workers []struct {
		PID        int    `json:"pid"`
		Generation uint64 `json:"generation"`
		Refused    uint64 `json:"refused"`
	} `json:"workers"`
	Overflow uint64 `json:"overflow"`
	Backends []struct {
		Name     string `json:"name"`
		Local    uint64 `json:"local"`
		Remote   uint64 `json:"remote"`
		Failures uint64 `json:"failures"`
	} `json:"backends"`
}

func readStatus(t *testing.T, n *harness.Nginx) status {
	t.Helper()
	resp, err := http.Get(n.URL("/zonal/status"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/json" {
		t.Fatalf("status: %s %q: %s", resp.Status, resp.Header.Get("Content-Type"), body)
	}
	var s status
	if err := json.Unmarshal(body, &s); err != nil {
		t.Fatalf("status is not JSON: %v\n%s", err, body)
	}
	return s
}

// The status location counts every pick by locality (a peer in the table's
// own zone, or not) across both workers, and every failed attempt; each
// worker reports the generation it serves.
func TestStatusCountsPicksByLocality(t *testing.T) {
	t.Parallel()
	zoneA := harness.StartBackends(t, "zone-a", "127.0.0.2", "127.0.0.3")
	zoneB := harness.StartBackends(t, "zone-b", "127.0.0.4")
	refusing := harness.RefusingPeer(t, refusingIP, "zone-c", false)
	tbl := oneBackend(7000, map[string]uint32{"zone-b": 5000, "zone-c": 5000},
		append(append(peers(zoneA, true), peers(zoneB, false)...), refusing)...)
	n, ts := setup(t, harness.Config{UpstreamParams: "max_fails=0"}, tbl)
	gen := ts.Publisher().Generation()

	const requests = 2000
	res := n.Run(harness.Load{Path: "/b/" + echo, Requests: requests, Clients: 4})
	checkLoad(t, "status load", res)

	s := readStatus(t, n)
	if len(s.Workers) != n.Workers {
		t.Errorf("status lists %d workers, want %d: %+v", len(s.Workers), n.Workers, s.Workers)
	}
	for _, w := range s.Workers {
		if w.Generation != gen || w.Refused != 0 {
			t.Errorf("worker %d serves generation %d (refused %d), want %d", w.PID, w.Generation, w.Refused, gen)
		}
	}
	if len(s.Backends) != 1 || s.Backends[0].Name != echo {
		t.Fatalf("status backends %+v, want %s alone", s.Backends, echo)
	}
	b := s.Backends[0]
	local := res.ByPeer[zoneA[0].String()] + res.ByPeer[zoneA[1].String()]
	if int(b.Local) != local {
		t.Errorf("local picks %d, but zone-a peers answered %d requests", b.Local, local)
	}
	// Every failure is a pick of the refusing zone-c peer, then a retry.
	if int(b.Local+b.Remote) != requests+int(b.Failures) {
		t.Errorf("picks %d local + %d remote, want %d requests + %d failures", b.Local, b.Remote, requests, b.Failures)
	}
	if b.Failures == 0 {
		t.Error("no failure counted, though a zone-c peer refuses connections")
	}
	expectShare(t, "local picks", int(b.Local), int(b.Local+b.Remote), 0.7)
}

// A table without an own zone counts every pick as remote.
func TestStatusWithoutOwnZoneCountsRemote(t *testing.T) {
	t.Parallel()
	backends := harness.StartBackends(t, "zone-a", "127.0.0.2")
	tbl := &table.Table{Backends: []table.Backend{{Name: echo, Peers: peers(backends, false)}}}
	n, _ := setup(t, harness.Config{}, tbl)
	res := n.Run(harness.Load{Path: "/b/" + echo, Requests: 50})
	checkLoad(t, "no own zone", res)
	s := readStatus(t, n)
	if len(s.Backends) != 1 || s.Backends[0].Local != 0 || s.Backends[0].Remote != 50 {
		t.Errorf("status backends %+v, want 50 remote picks", s.Backends)
	}
}
