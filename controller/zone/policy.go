package zone

import (
	"math"
	"slices"

	"github.com/zonal-ingress/zonal/controller/model"
)

// Policy is everything the zone decision depends on besides the backend.
type Policy struct {
	// Zone is the ingress pod's own zone; "" when unknown.
	Zone string
	// Mode is the default mode (--zone-mode).
	Mode Mode
	// MinEndpoints is the least number of ready endpoints a backend needs
	// before balanced mode prefers any (--zone-min-endpoints).
	MinEndpoints int
	// Replicas counts the controller's own replicas per zone, for
	// balanced mode; nil or one replica in all means every replica is
	// alone and keeps its traffic local.
	Replicas map[string]int
}

// Decision is how one backend's requests are spread.
type Decision struct {
	// Mode is the mode in effect: the Service's annotation, else the
	// policy's, with auto resolved to hints or off.
	Mode Mode
	// Preferred marks, per endpoint of the backend, the preferred set.
	// Nil when no endpoint is preferred.
	Preferred []bool
	// LocalShare is the fraction of requests, in basis points, sent to
	// the preferred set.
	LocalShare uint32
	// Spill weighs the other zones against each other for the rest, in
	// basis points; nil spreads it in proportion to the zones' endpoints.
	Spill map[string]uint32
	// Fallback says why a mode that prefers peers prefers none here; ""
	// when it does prefer, or for mode off.
	Fallback string
}

// Reasons for falling back to all peers. They read as the end of "routing
// to all peers: ...".
const (
	FallbackNoZone       = "own zone unknown"
	FallbackNoLocal      = "no ready endpoint in the own zone"
	FallbackMissingHints = "an endpoint has no zone hints"
	FallbackNoHints      = "no endpoint is hinted for the own zone"
	FallbackTooFew       = "fewer ready endpoints than --zone-min-endpoints"
	FallbackBadMode      = "unknown zonal.dev/zone-mode annotation"
)

// Decide chooses the preferred peers of b and the share of requests they
// get, and always fails open: whenever a mode cannot safely prefer some
// peers (no own zone, no local or hinted endpoint, partial hints, too few
// endpoints), the backend routes to all its peers, never to none.
//
// Terminating and not-ready endpoints are never preferred: the model only
// hands them over when no endpoint is ready, and then all peers are used.
//
//   - off: no preference.
//   - local: the ready endpoints of the own zone, with all requests.
//   - hints: the ready endpoints whose hints.forZones include the own zone,
//     with all requests, if every ready endpoint carries hints (kube-proxy's
//     safeguard: during a rollout of hints, some endpoints lack them).
//   - balanced: the ready endpoints of the own zone, with the share
//     min(1, local capacity share / local replica share); the rest goes to
//     the zones whose capacity share exceeds their replica share, in
//     proportion to the excess (Envoy's zone-aware routing).
//   - auto: hints for a Service that asks for topology-aware routing
//     (spec.trafficDistribution, or the topology-mode annotation), else off.
func Decide(b *model.Backend, p Policy) Decision {
	mode, ok := effectiveMode(b, p.Mode)
	d := Decision{Mode: mode}
	switch {
	case !ok:
		d.Fallback = FallbackBadMode
		return d
	case mode == ModeOff:
		return d
	case p.Zone == "":
		d.Fallback = FallbackNoZone
		return d
	}

	switch mode {
	case ModeLocal:
		d.Preferred, d.Fallback = preferLocal(b, p.Zone)
	case ModeHints:
		d.Preferred, d.Fallback = preferHinted(b, p.Zone)
	case ModeBalanced:
		if readyCount(b) < p.MinEndpoints {
			d.Fallback = FallbackTooFew
			return d
		}
		d.Preferred, d.Fallback = preferLocal(b, p.Zone)
		if d.Preferred != nil {
			d.LocalShare, d.Spill = balance(b, p)
			return d
		}
	}
	if d.Preferred != nil {
		d.LocalShare = ShareOne
	}
	return d
}

// ShareOne is 100 %, in basis points.
const ShareOne = 10000

// effectiveMode resolves the Service's annotation and auto; ok is false for
// an annotation that names no mode (which then acts as off).
func effectiveMode(b *model.Backend, def Mode) (Mode, bool) {
	mode := def
	if b.ZoneMode != "" {
		m, err := ParseMode(b.ZoneMode)
		if err != nil {
			return ModeOff, false
		}
		mode = m
	}
	if mode == ModeAuto {
		if asksForTopology(b) {
			return ModeHints, true
		}
		return ModeOff, true
	}
	return mode, true
}

// asksForTopology tells whether a Service asks for topology-aware routing,
// as kube-proxy reads it.
func asksForTopology(b *model.Backend) bool {
	switch b.TrafficDistribution {
	case "PreferClose", "PreferSameZone", "PreferSameNode":
		return true
	}
	switch b.TopologyMode {
	case "Auto", "auto":
		return true
	}
	return false
}

func preferable(e *model.Endpoint) bool { return e.Ready && !e.Terminating }

func readyCount(b *model.Backend) int {
	n := 0
	for i := range b.Endpoints {
		if preferable(&b.Endpoints[i]) {
			n++
		}
	}
	return n
}

func preferLocal(b *model.Backend, zone string) ([]bool, string) {
	return prefer(b, func(e *model.Endpoint) bool { return e.Zone == zone }, FallbackNoLocal)
}

func preferHinted(b *model.Backend, zone string) ([]bool, string) {
	for i := range b.Endpoints {
		if e := &b.Endpoints[i]; preferable(e) && len(e.ForZones) == 0 {
			return nil, FallbackMissingHints
		}
	}
	return prefer(b, func(e *model.Endpoint) bool { return slices.Contains(e.ForZones, zone) }, FallbackNoHints)
}

// prefer marks the preferable endpoints that match; none matching is the
// fallback given.
func prefer(b *model.Backend, match func(*model.Endpoint) bool, none string) ([]bool, string) {
	var marks []bool
	for i := range b.Endpoints {
		if e := &b.Endpoints[i]; preferable(e) && match(e) {
			if marks == nil {
				marks = make([]bool, len(b.Endpoints))
			}
			marks[i] = true
		}
	}
	if marks == nil {
		return nil, none
	}
	return marks, ""
}

// balance is the local share and the spill of balanced mode: each zone
// should take the share of requests its share of capacity (ready
// endpoints) can carry, given that each ingress replica receives an equal
// part of the traffic.
func balance(b *model.Backend, p Policy) (uint32, map[string]uint32) {
	replicas := 0
	for _, n := range p.Replicas {
		replicas += max(n, 0)
	}
	mine := p.Replicas[p.Zone]
	if replicas <= 1 || mine <= 0 || mine == replicas {
		// Alone, or the only zone with replicas (or replicas unknown):
		// there is no other replica to share the remote zones' load with.
		return ShareOne, nil
	}

	capacity := map[string]int{}
	total := 0
	for i := range b.Endpoints {
		if e := &b.Endpoints[i]; preferable(e) {
			capacity[e.Zone]++
			total++
		}
	}
	capShare := func(z string) float64 { return float64(capacity[z]) / float64(total) }
	repShare := func(z string) float64 { return float64(max(p.Replicas[z], 0)) / float64(replicas) }

	local := capShare(p.Zone) / repShare(p.Zone)
	if local >= 1 {
		return ShareOne, nil
	}
	spill := map[string]uint32{}
	var excess float64
	for z := range capacity {
		if z != p.Zone {
			excess += max(capShare(z)-repShare(z), 0)
		}
	}
	for z := range capacity {
		if z == p.Zone {
			continue
		}
		if excess > 0 {
			spill[z] = uint32(math.Round(max(capShare(z)-repShare(z), 0) / excess * ShareOne))
		} else {
			// No zone has spare capacity: spread by capacity.
			spill[z] = uint32(math.Round(float64(capacity[z]) / float64(total-capacity[p.Zone]) * ShareOne))
		}
	}
	return uint32(math.Round(local * ShareOne)), spill
}
