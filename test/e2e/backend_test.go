package e2e

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/test/harness"
)

// A backend the table does not know, or one without peers, answers 503
// with one error log line naming it, and does not disturb the backends
// that work.
func TestUnavailableBackend503(t *testing.T) {
	t.Parallel()
	a := harness.StartBackend(t, "127.0.0.2", "zone-a")
	tbl := oneBackend(table.ShareOne, nil, a.Peer(true))
	tbl.Backends = append(tbl.Backends, table.Backend{Name: "default-nopeers-80", LocalShare: table.ShareOne})
	n, _ := setup(t, harness.Config{}, tbl)
	c := n.Client(true)

	tests := []struct {
		name, path string
		logLine    string // the one error log line the request must cause
	}{
		{"unknown backend", "/b/default-nosuch-80", `zonal: backend "default-nosuch-80" is not in endpoint table generation`},
		{"backend without peers", "/b/default-nopeers-80", `zonal: backend "default-nopeers-80" has no peers in endpoint table generation`},
	}
	for _, tc := range tests {
		// Sequential: each request's log line is told apart by offset.
		off := n.ErrorLogSize()
		r := c.MustGet(t, tc.path)
		if r.Status != 503 {
			t.Errorf("%s: %s, want 503", tc.name, describe(r))
		}
		log := n.ErrorLogSince(off)
		lines := harness.Grep(log, "[error]", "[crit]", "[alert]")
		if len(lines) != 1 || !strings.Contains(lines[0], tc.logLine) {
			t.Errorf("%s: error log after one request:\n%s\nwant exactly one error line containing %q", tc.name, log, tc.logLine)
		}
		if r := c.MustGet(t, "/b/"+echo); r.Status != 200 || r.Peer != a.String() {
			t.Errorf("after %s: %s, want 200 from %s", tc.name, describe(r), a)
		}
	}
}

// An empty backend name (the location's variable is set to "") answers
// 503, as DESIGN.md asks of an unknown or empty backend, with one error
// log line.
func TestEmptyBackendName503(t *testing.T) {
	t.Parallel()
	a := harness.StartBackend(t, "127.0.0.2", "zone-a")
	n, _ := setup(t, harness.Config{}, oneBackend(table.ShareOne, nil, a.Peer(true)))
	c := n.Client(true)
	r := c.MustGet(t, "/b/")
	log := n.ErrorLog()
	if lines := harness.Grep(log, "[error]", "[crit]", "[alert]"); len(lines) != 1 || !strings.Contains(lines[0], "empty") {
		t.Errorf("error log after one request:\n%s\nwant exactly one error line saying the backend is empty", log)
	}
	if r.Status != 503 {
		t.Errorf("empty backend name: %s, want 503", describe(r))
	}
	if r := c.MustGet(t, "/b/"+echo); r.Status != 200 || r.Peer != a.String() {
		t.Errorf("afterwards: %s, want 200 from %s", describe(r), a)
	}
}

// Upstream connections are kept alive and reused: sequential requests
// through one client connection open far fewer backend connections than
// requests. Without "keepalive" every request opens one, which shows the
// backend counts connections.
func TestUpstreamKeepalive(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		keepalive int
		maxConns  func(requests int) int
		minConns  func(requests int) int
	}{
		"keepalive 16": {
			keepalive: 16,
			// One client connection stays on one worker, which needs one
			// upstream connection; allow for a few closed on the way.
			maxConns: func(requests int) int { return requests / 20 },
			minConns: func(int) int { return 1 },
		},
		"no keepalive": {
			keepalive: -1,
			maxConns:  func(requests int) int { return requests },
			minConns:  func(requests int) int { return requests },
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := harness.StartBackend(t, "127.0.0.2", "zone-a")
			n, _ := setup(t, harness.Config{Keepalive: tc.keepalive}, oneBackend(table.ShareOne, nil, a.Peer(true)))
			c := n.Client(true)
			const requests = 200
			for i := range requests {
				if r := c.MustGet(t, "/b/"+echo); r.Status != 200 || r.Peer != a.String() {
					t.Fatalf("request %d: %s", i, describe(r))
				}
			}
			conns := int(a.Conns())
			t.Logf("%d sequential requests, %d backend connections", requests, conns)
			if conns > tc.maxConns(requests) || conns < tc.minConns(requests) {
				t.Errorf("%d requests opened %d backend connections, want %d to %d",
					requests, conns, tc.minConns(requests), tc.maxConns(requests))
			}
		})
	}
}

// A peer with an IPv6 address is reached, and named in $upstream_addr.
func TestIPv6Peer(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "[::1]:0")
	if err != nil {
		t.Skipf("this machine cannot bind ::1: %v", err)
	}
	l.Close()
	v6 := harness.StartBackend(t, "::1", "zone-a")
	v4 := harness.StartBackend(t, "127.0.0.2", "zone-b")
	n, _ := setup(t, harness.Config{}, oneBackend(table.ShareOne, nil, v6.Peer(true), v4.Peer(false)))
	c := n.Client(true)
	const requests = 20
	for i := range requests {
		r := c.MustGet(t, "/b/"+echo)
		if r.Status != 200 || r.Peer != v6.String() || r.Body != v6.Body() {
			t.Fatalf("request %d: %s, want 200 from %s", i, describe(r), v6)
		}
	}
	for _, e := range n.WaitAccessLog(requests, 10*time.Second) {
		if e.UpstreamAddr != v6.String() {
			t.Errorf("$upstream_addr %q, want %q", e.UpstreamAddr, v6.String())
		}
	}
}
