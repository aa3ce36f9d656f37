package e2e

import (
	"strings"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/test/harness"
)

// A peer that refuses connections is skipped and the request retried on
// another peer, so that no request fails; when the refusing peer is the
// whole preferred set, the retry leaves the preferred set.
func TestRefusingPeerRetriedElsewhere(t *testing.T) {
	t.Parallel()
	tests := map[string]struct {
		params           string
		refuserPreferred bool
		localShare       uint32
		// markedDown: after its first refusal the peer is out of service
		// (max_fails=1, a fail_timeout far longer than the test).
		markedDown bool
	}{
		"refusing peer in a spill zone": {
			localShare: 5000, params: "max_fails=1 fail_timeout=300s", markedDown: true,
		},
		"refusing peer is the preferred set": {
			refuserPreferred: true, localShare: table.ShareOne,
			params: "max_fails=1 fail_timeout=300s", markedDown: true,
		},
		"refusing peer is the preferred set, never marked down": {
			refuserPreferred: true, localShare: table.ShareOne,
			params: "max_fails=0",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a := harness.StartBackend(t, "127.0.0.2", "zone-a")
			b := harness.StartBackend(t, "127.0.0.3", "zone-b")
			c := harness.StartBackend(t, "127.0.0.4", "zone-c")
			var tbl *table.Table
			refuser := harness.RefusingPeer(t, refusingIP, "zone-a", tc.refuserPreferred)
			if tc.refuserPreferred {
				tbl = oneBackend(tc.localShare, nil, refuser, b.Peer(false), c.Peer(false))
			} else {
				refuser.Zone = "zone-b"
				tbl = oneBackend(tc.localShare, nil, a.Peer(true), b.Peer(false), refuser, c.Peer(false))
			}
			n, _ := setup(t, harness.Config{UpstreamParams: tc.params}, tbl)

			const requests, clients = 400, 4
			live := names(a, b, c)
			res := n.Run(harness.Load{Path: "/b/" + echo, Requests: requests, Clients: clients})
			checkLoad(t, name, res)
			if res.OK != requests {
				t.Fatalf("%d of %d requests answered", res.OK, requests)
			}
			for peer := range res.ByPeer {
				if !live[peer] {
					t.Errorf("answer from %q", peer)
				}
			}
			if tc.refuserPreferred && res.ByPeer[a.String()] != 0 {
				t.Errorf("zone-a backend %s is not in the table but answered", a)
			}

			// The refusing peer was tried: NGINX logged the refusals and
			// the access log shows the retries.
			refusedLines := n.ErrorLines("Connection refused")
			entries := n.WaitAccessLog(requests, 10*time.Second)
			retried := map[int]int{}
			for _, e := range entries {
				addrs := strings.Split(e.UpstreamAddr, ", ")
				if len(addrs) > 1 {
					retried[e.Worker]++
					if len(addrs) != 2 || addrs[0] != harness.PeerName(refuser) || !live[addrs[1]] {
						t.Errorf("retried request: $upstream_addr %q, want the refusing peer %s then a live one",
							e.UpstreamAddr, harness.PeerName(refuser))
					}
				}
			}
			total := 0
			for _, c := range retried {
				total += c
			}
			t.Logf("%d requests, %d retried after a refusal (by worker %v), %d refusals logged; by peer %v",
				res.OK, total, retried, len(refusedLines), res.ByPeer)
			if total == 0 || len(refusedLines) == 0 {
				t.Errorf("the refusing peer %s was never tried", harness.PeerName(refuser))
			}
			if len(refusedLines) != total {
				t.Errorf("%d refusals logged but %d requests retried", len(refusedLines), total)
			}
			switch {
			case tc.markedDown && total > clients:
				// Requests already connecting when the first refusal
				// arrives may still meet the peer: at most one per
				// client connection.
				t.Errorf("%d requests met the refusing peer; max_fails=1 should take it out after the first "+
					"(allowing one per each of the %d concurrent clients)", total, clients)
			case !tc.markedDown && tc.refuserPreferred && total != requests:
				t.Errorf("with max_fails=0 every request should try the preferred peer first; %d of %d did", total, requests)
			}
		})
	}
}

// $upstream_addr in the access log names the peer that answered, and
// after a retry every peer tried, in order.
func TestUpstreamAddrInAccessLog(t *testing.T) {
	t.Parallel()
	a := harness.StartBackend(t, "127.0.0.2", "zone-a")
	b := harness.StartBackend(t, "127.0.0.3", "zone-b")
	refuser := harness.RefusingPeer(t, refusingIP, "zone-a", true)
	n, ts := setup(t, harness.Config{UpstreamParams: "max_fails=0"}, oneBackend(table.ShareOne, nil, a.Peer(true)))
	c := n.Client(true)

	if r := c.MustGet(t, "/b/"+echo); r.Status != 200 || r.Peer != a.String() {
		t.Fatalf("%s, want 200 from %s", describe(r), a)
	}
	ts.Publish(oneBackend(table.ShareOne, nil, refuser, b.Peer(false)))
	if r := c.MustGet(t, "/b/"+echo); r.Status != 200 || r.Peer != b.String() {
		t.Fatalf("%s, want 200 from %s", describe(r), b)
	}
	entries := n.WaitAccessLog(2, 10*time.Second)
	if len(entries) != 2 {
		t.Fatalf("access log has %d lines, want 2: %v", len(entries), entries)
	}
	want := []string{a.String(), harness.PeerName(refuser) + ", " + b.String()}
	for i, e := range entries {
		if e.UpstreamAddr != want[i] {
			t.Errorf("request %d: $upstream_addr %q, want %q (line %q)", i, e.UpstreamAddr, want[i], e.Raw)
		}
	}
	if e := entries[1]; e.UpstreamStatus != "502, 200" {
		t.Errorf("after the retry: $upstream_status %q, want \"502, 200\"", e.UpstreamStatus)
	}
}
