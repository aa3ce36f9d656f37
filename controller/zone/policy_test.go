package zone

import (
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/zonal-ingress/zonal/controller/model"
)

// ep is an endpoint written as "name zone [hint,hint] [flags]", where the
// name is the last octet of its address and flags are "notready" and
// "terminating"; "-" stands for no zone and no hints.
func ep(s string) model.Endpoint {
	f := strings.Fields(s)
	n, _ := strconv.Atoi(f[0])
	e := model.Endpoint{Address: netip.AddrFrom4([4]byte{10, 0, 0, byte(n)}), Port: 80, Ready: true, Serving: true}
	if f[1] != "-" {
		e.Zone = f[1]
	}
	for _, x := range f[2:] {
		switch x {
		case "notready":
			e.Ready = false
		case "terminating":
			e.Ready, e.Terminating = false, true
		case "-":
		default:
			e.ForZones = strings.Split(x, ",")
		}
	}
	return e
}

func backend(eps ...string) model.Backend {
	b := model.Backend{Name: "demo-web-80"}
	for _, s := range eps {
		b.Endpoints = append(b.Endpoints, ep(s))
	}
	return b
}

// preferredNames lists the names of the preferred endpoints.
func preferredNames(b *model.Backend, d Decision) []string {
	var out []string
	for i, p := range d.Preferred {
		if p {
			out = append(out, strconv.Itoa(int(b.Endpoints[i].Address.As4()[3])))
		}
	}
	return out
}

func TestDecide(t *testing.T) {
	threeZones := []string{"1 zone-a", "2 zone-a", "3 zone-b", "4 zone-b", "5 zone-c", "6 zone-c"}
	hinted := []string{"1 zone-a zone-a", "2 zone-b zone-b", "3 zone-c zone-c"}
	cases := map[string]struct {
		policy    Policy
		backend   model.Backend
		mutate    func(*model.Backend)
		mode      Mode
		preferred []string
		share     uint32
		spill     map[string]uint32
		fallback  string
	}{
		"off prefers none": {
			policy: Policy{Zone: "zone-a", Mode: ModeOff}, backend: backend(threeZones...),
			mode: ModeOff,
		},
		"local prefers the own zone": {
			policy: Policy{Zone: "zone-a", Mode: ModeLocal}, backend: backend(threeZones...),
			mode: ModeLocal, preferred: []string{"1", "2"}, share: ShareOne,
		},
		"local with no endpoint in the own zone routes to all": {
			policy: Policy{Zone: "zone-d", Mode: ModeLocal}, backend: backend(threeZones...),
			mode: ModeLocal, fallback: FallbackNoLocal,
		},
		"local never prefers terminating or not ready endpoints": {
			policy:  Policy{Zone: "zone-a", Mode: ModeLocal},
			backend: backend("1 zone-a terminating", "2 zone-a notready", "3 zone-a", "4 zone-b"),
			mode:    ModeLocal, preferred: []string{"3"}, share: ShareOne,
		},
		"local whose own endpoints all terminate routes to all": {
			policy:  Policy{Zone: "zone-a", Mode: ModeLocal},
			backend: backend("1 zone-a terminating", "2 zone-b"),
			mode:    ModeLocal, fallback: FallbackNoLocal,
		},
		"no own zone routes to all": {
			policy: Policy{Mode: ModeLocal}, backend: backend(threeZones...),
			mode: ModeLocal, fallback: FallbackNoZone,
		},
		"endpoints without zones are never local": {
			policy: Policy{Zone: "zone-a", Mode: ModeLocal}, backend: backend("1 -", "2 zone-a"),
			mode: ModeLocal, preferred: []string{"2"}, share: ShareOne,
		},
		"one zone: everything local": {
			policy: Policy{Zone: "zone-a", Mode: ModeLocal}, backend: backend("1 zone-a", "2 zone-a"),
			mode: ModeLocal, preferred: []string{"1", "2"}, share: ShareOne,
		},
		"hints prefer the endpoints hinted for the own zone": {
			policy:  Policy{Zone: "zone-a", Mode: ModeHints},
			backend: backend("1 zone-a zone-a", "2 zone-b zone-a,zone-b", "3 zone-c zone-c"),
			mode:    ModeHints, preferred: []string{"1", "2"}, share: ShareOne,
		},
		"partial hints route to all": {
			policy:  Policy{Zone: "zone-a", Mode: ModeHints},
			backend: backend("1 zone-a zone-a", "2 zone-b", "3 zone-c zone-c"),
			mode:    ModeHints, fallback: FallbackMissingHints,
		},
		"hints for other zones only route to all": {
			policy:  Policy{Zone: "zone-a", Mode: ModeHints},
			backend: backend("1 zone-b zone-b", "2 zone-c zone-c"),
			mode:    ModeHints, fallback: FallbackNoHints,
		},
		"a terminating endpoint without hints does not disable hints": {
			policy:  Policy{Zone: "zone-a", Mode: ModeHints},
			backend: backend("1 zone-a zone-a", "2 zone-b - terminating", "3 zone-b zone-b"),
			mode:    ModeHints, preferred: []string{"1"}, share: ShareOne,
		},
		"auto uses hints when trafficDistribution asks": {
			policy: Policy{Zone: "zone-b", Mode: ModeAuto}, backend: backend(hinted...),
			mutate: func(b *model.Backend) { b.TrafficDistribution = "PreferClose" },
			mode:   ModeHints, preferred: []string{"2"}, share: ShareOne,
		},
		"auto uses hints when the topology-mode annotation asks": {
			policy: Policy{Zone: "zone-b", Mode: ModeAuto}, backend: backend(hinted...),
			mutate: func(b *model.Backend) { b.TopologyMode = "Auto" },
			mode:   ModeHints, preferred: []string{"2"}, share: ShareOne,
		},
		"auto is off for a Service that does not ask": {
			policy: Policy{Zone: "zone-b", Mode: ModeAuto}, backend: backend(hinted...),
			mode: ModeOff,
		},
		"the Service annotation overrides the mode": {
			policy: Policy{Zone: "zone-a", Mode: ModeOff}, backend: backend(threeZones...),
			mutate: func(b *model.Backend) { b.ZoneMode = "local" },
			mode:   ModeLocal, preferred: []string{"1", "2"}, share: ShareOne,
		},
		"an unknown annotation routes to all": {
			policy: Policy{Zone: "zone-a", Mode: ModeLocal}, backend: backend(threeZones...),
			mutate: func(b *model.Backend) { b.ZoneMode = "nearest" },
			mode:   ModeOff, fallback: FallbackBadMode,
		},
		"balanced with one replica keeps everything local": {
			policy:  Policy{Zone: "zone-a", Mode: ModeBalanced, MinEndpoints: 3, Replicas: map[string]int{"zone-a": 1}},
			backend: backend(threeZones...),
			mode:    ModeBalanced, preferred: []string{"1", "2"}, share: ShareOne,
		},
		"balanced with even zones keeps everything local": {
			policy:  Policy{Zone: "zone-a", Mode: ModeBalanced, MinEndpoints: 3, Replicas: map[string]int{"zone-a": 2, "zone-b": 2, "zone-c": 2}},
			backend: backend(threeZones...),
			mode:    ModeBalanced, preferred: []string{"1", "2"}, share: ShareOne,
		},
		"balanced spills what the own zone cannot carry to zones with spare capacity": {
			// capacity a 1/6, b 2/6, c 3/6; replicas a third each: a keeps
			// (1/6)/(1/3) = 50 %; b has no spare, c has 1/6 spare.
			policy:  Policy{Zone: "zone-a", Mode: ModeBalanced, MinEndpoints: 3, Replicas: map[string]int{"zone-a": 1, "zone-b": 1, "zone-c": 1}},
			backend: backend("1 zone-a", "2 zone-b", "3 zone-b", "4 zone-c", "5 zone-c", "6 zone-c"),
			mode:    ModeBalanced, preferred: []string{"1"}, share: 5000,
			spill: map[string]uint32{"zone-b": 0, "zone-c": ShareOne},
		},
		"balanced in a zone with more capacity than replicas keeps everything local": {
			policy:  Policy{Zone: "zone-c", Mode: ModeBalanced, MinEndpoints: 3, Replicas: map[string]int{"zone-a": 1, "zone-b": 1, "zone-c": 1}},
			backend: backend("1 zone-a", "2 zone-b", "3 zone-b", "4 zone-c", "5 zone-c", "6 zone-c"),
			mode:    ModeBalanced, preferred: []string{"4", "5", "6"}, share: ShareOne,
		},
		"balanced with uneven replicas": {
			// capacity a 1/4, b 1/4, c 2/4; replicas a 1/2, b 1/4, c 1/4: a
			// keeps (1/4)/(1/2) = 50 %, the rest goes to c (spare 1/4).
			policy:  Policy{Zone: "zone-a", Mode: ModeBalanced, MinEndpoints: 3, Replicas: map[string]int{"zone-a": 2, "zone-b": 1, "zone-c": 1}},
			backend: backend("1 zone-a", "2 zone-b", "3 zone-c", "4 zone-c"),
			mode:    ModeBalanced, preferred: []string{"1"}, share: 5000,
			spill: map[string]uint32{"zone-b": 0, "zone-c": ShareOne},
		},
		"balanced below the minimum size routes to all": {
			policy:  Policy{Zone: "zone-a", Mode: ModeBalanced, MinEndpoints: 3, Replicas: map[string]int{"zone-a": 1, "zone-b": 1}},
			backend: backend("1 zone-a", "2 zone-b", "3 zone-b notready"),
			mode:    ModeBalanced, fallback: FallbackTooFew,
		},
		"balanced with no local endpoint routes to all": {
			policy:  Policy{Zone: "zone-a", Mode: ModeBalanced, MinEndpoints: 3, Replicas: map[string]int{"zone-a": 1, "zone-b": 1}},
			backend: backend("1 zone-b", "2 zone-b", "3 zone-c"),
			mode:    ModeBalanced, fallback: FallbackNoLocal,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			b := tc.backend
			if tc.mutate != nil {
				tc.mutate(&b)
			}
			d := Decide(&b, tc.policy)
			if d.Mode != tc.mode || d.Fallback != tc.fallback {
				t.Errorf("mode %s, fallback %q; want %s, %q", d.Mode, d.Fallback, tc.mode, tc.fallback)
			}
			if got := preferredNames(&b, d); !slices.Equal(got, tc.preferred) {
				t.Errorf("preferred %v, want %v", got, tc.preferred)
			}
			if d.LocalShare != tc.share {
				t.Errorf("local share %d, want %d", d.LocalShare, tc.share)
			}
			if !reflect.DeepEqual(d.Spill, tc.spill) {
				t.Errorf("spill %v, want %v", d.Spill, tc.spill)
			}
			if d.Preferred == nil && d.LocalShare != 0 {
				t.Errorf("a local share of %d with no preferred peer", d.LocalShare)
			}
		})
	}
}

func TestTableCarriesDecisions(t *testing.T) {
	m := &model.Model{Backends: []model.Backend{backend("1 zone-a", "2 zone-b"), {Name: "demo-empty-80"}}}
	tab, decisions := Table(m, Policy{Zone: "zone-a", Mode: ModeLocal})
	if tab.Zone != "zone-a" || len(tab.Backends) != 2 || len(decisions) != 2 {
		t.Fatalf("table %+v, decisions %+v", tab, decisions)
	}
	b := tab.Backends[0]
	if b.LocalShare != ShareOne || !b.Peers[0].Preferred || b.Peers[1].Preferred || b.Peers[1].Zone != "zone-b" {
		t.Errorf("backend %+v: want peer 1 preferred with the whole share", b)
	}
	if decisions[1].Fallback != FallbackNoLocal || len(tab.Backends[1].Peers) != 0 {
		t.Errorf("empty backend: %+v, %+v", tab.Backends[1], decisions[1])
	}
}
