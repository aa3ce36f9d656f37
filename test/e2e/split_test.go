package e2e

import (
	"strconv"
	"testing"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/test/harness"
)

// With a local share of 100 % every request goes to the preferred set (the
// zone-local peers), and round robin spreads them over all of its peers.
func TestFullLocalShareStaysInPreferredSet(t *testing.T) {
	t.Parallel()
	zoneA := harness.StartBackends(t, "zone-a", "127.0.0.2", "127.0.0.3", "127.0.0.4")
	zoneB := harness.StartBackends(t, "zone-b", "127.0.0.5")
	zoneC := harness.StartBackends(t, "zone-c", "127.0.0.6", "127.0.0.7")
	tbl := oneBackend(table.ShareOne, nil,
		append(append(peers(zoneA, true), peers(zoneB, false)...), peers(zoneC, false)...)...)
	n, _ := setup(t, harness.Config{}, tbl)

	const requests = 300
	res := n.Run(harness.Load{Path: "/b/" + echo, Requests: requests})
	checkLoad(t, "full local share", res)
	if res.OK != requests {
		t.Fatalf("%d of %d requests answered", res.OK, requests)
	}
	local := names(zoneA...)
	for peer, count := range res.ByPeer {
		if !local[peer] {
			t.Errorf("%d requests went to %s, outside the preferred set %v", count, peer, keys(local))
		}
	}
	for _, b := range zoneA {
		expectShare(t, "zone-a peer "+b.String(), res.ByPeer[b.String()], requests, 1.0/3)
		if res.ByPeer[b.String()] == 0 {
			t.Errorf("preferred peer %s got no request", b)
		}
	}
	for _, b := range append(zoneB, zoneC...) {
		if got := b.Requests(); got != 0 {
			t.Errorf("%s peer %s answered %d requests at a local share of 100 %%", b.Zone, b, got)
		}
	}
}

// Below 100 %, the preferred set gets the local share and the other zones
// split the rest by their residual weights (given, or in proportion to
// their peers' weights); inside a set, peers are picked by weight.
func TestLocalShareAndSpillSplit(t *testing.T) {
	t.Parallel()
	type share struct {
		zone string
		p    float64
	}
	tests := map[string]struct {
		localShare uint32
		spill      map[string]uint32
		weightsA   []uint32 // zone-a peers (preferred)
		weightsB   []uint32
		weightsC   []uint32
		requests   int
		want       []share
	}{
		"spill given per zone": {
			localShare: 7000,
			spill:      map[string]uint32{"zone-b": 2000, "zone-c": 8000},
			weightsA:   []uint32{1, 1},
			weightsB:   []uint32{1},
			weightsC:   []uint32{1, 1},
			requests:   4000,
			want:       []share{{"zone-a", 0.7}, {"zone-b", 0.3 * 0.2}, {"zone-c", 0.3 * 0.8}},
		},
		"spill in proportion to weights": {
			localShare: 5000,
			weightsA:   []uint32{1},
			weightsB:   []uint32{1},
			weightsC:   []uint32{1, 1},
			requests:   3000,
			want:       []share{{"zone-a", 0.5}, {"zone-b", 0.5 / 3}, {"zone-c", 0.5 * 2 / 3}},
		},
		"no local share": {
			localShare: 0,
			spill:      map[string]uint32{"zone-b": 5000, "zone-c": 5000},
			weightsA:   []uint32{1},
			weightsB:   []uint32{1},
			weightsC:   []uint32{1},
			requests:   1000,
			want:       []share{{"zone-a", 0}, {"zone-b", 0.5}, {"zone-c", 0.5}},
		},
		"peer weights 1 and 3": {
			localShare: table.ShareOne,
			weightsA:   []uint32{1, 3},
			weightsB:   []uint32{1},
			requests:   2000,
			want:       []share{{"zone-a", 1}, {"zone-b", 0}},
		},
		"peer weights 1 and 3 beside a spill": {
			localShare: 7000,
			spill:      map[string]uint32{"zone-b": 2000, "zone-c": 8000},
			weightsA:   []uint32{1, 3},
			weightsB:   []uint32{1},
			weightsC:   []uint32{3, 1},
			requests:   4000,
			want:       []share{{"zone-a", 0.7}, {"zone-b", 0.06}, {"zone-c", 0.24}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var (
				tblPeers []table.Peer
				byZone   = map[string][]*harness.Backend{}
				weightOf = map[string]uint32{}
				zoneOf   = map[string]string{}
				ip       = 2
			)
			add := func(zone string, weights []uint32, preferred bool) {
				for _, w := range weights {
					b := harness.StartBackend(t, "127.0.0."+strconv.Itoa(ip), zone)
					ip++
					byZone[zone] = append(byZone[zone], b)
					weightOf[b.String()] = w
					zoneOf[b.String()] = zone
					tblPeers = append(tblPeers, b.WeightedPeer(w, preferred))
				}
			}
			add("zone-a", tc.weightsA, true)
			add("zone-b", tc.weightsB, false)
			add("zone-c", tc.weightsC, false)
			n, _ := setup(t, harness.Config{}, oneBackend(tc.localShare, tc.spill, tblPeers...))

			res := n.Run(harness.Load{Path: "/b/" + echo, Requests: tc.requests})
			checkLoad(t, name, res)
			if res.OK != tc.requests {
				t.Fatalf("%d of %d requests answered", res.OK, tc.requests)
			}
			perZone := map[string]int{}
			for peer, count := range res.ByPeer {
				zone, ok := zoneOf[peer]
				if !ok {
					t.Fatalf("%d answers from unknown peer %q", count, peer)
				}
				perZone[zone] += count
			}
			for _, s := range tc.want {
				expectShare(t, s.zone, perZone[s.zone], res.OK, s.p)
			}
			// Inside each zone, by weight, given how many the zone got.
			for zone, bs := range byZone {
				var total uint32
				for _, b := range bs {
					total += weightOf[b.String()]
				}
				if len(bs) < 2 || perZone[zone] == 0 {
					continue
				}
				for _, b := range bs {
					expectShare(t, zone+" peer "+b.String()+" of weight "+strconv.Itoa(int(weightOf[b.String()])),
						res.ByPeer[b.String()], perZone[zone], float64(weightOf[b.String()])/float64(total))
				}
			}
		})
	}
}
