// Package zone decides, per backend, which peers the NGINX module prefers
// and what share of requests stays in the ingress pod's own zone, and turns
// the model's backends into the endpoint table that carries those choices.
package zone

import (
	"fmt"
	"strings"

	core_v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/controller/model"
	"github.com/zonal-ingress/zonal/controller/store"
)

// Mode is how a backend's preferred peers are chosen.
type Mode string

// The zone modes of --zone-mode and the zonal.dev/zone-mode annotation.
const (
	ModeOff      Mode = "off"
	ModeLocal    Mode = "local"
	ModeHints    Mode = "hints"
	ModeBalanced Mode = "balanced"
	ModeAuto     Mode = "auto"
)

// Modes lists every mode, in the order --help shows them.
var Modes = []Mode{ModeOff, ModeLocal, ModeHints, ModeBalanced, ModeAuto}

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	names := make([]string, len(Modes))
	for i, m := range Modes {
		names[i] = string(m)
	}
	return "", fmt.Errorf("unknown zone mode %q: use one of %s", s, strings.Join(names, ", "))
}

// Table builds the endpoint table for m, deciding every backend with
// Decide; the decisions come back in the order of m.Backends.
func Table(m *model.Model, p Policy) (*table.Table, []Decision) {
	t := &table.Table{Zone: p.Zone, Backends: make([]table.Backend, len(m.Backends))}
	decisions := make([]Decision, len(m.Backends))
	npeers := 0
	for i := range m.Backends {
		npeers += len(m.Backends[i].Endpoints)
	}
	// One allocation for every peer: tables of 100,000 peers are rebuilt on
	// every endpoint change.
	peers := make([]table.Peer, npeers)
	for i := range m.Backends {
		b := &m.Backends[i]
		d := Decide(b, p)
		decisions[i] = d
		n := len(b.Endpoints)
		tb := &t.Backends[i]
		tb.Name = b.Name
		tb.LocalShare = d.LocalShare
		tb.Spill = d.Spill
		tb.Peers, peers = peers[:n:n], peers[n:]
		for j := range b.Endpoints {
			e := &b.Endpoints[j]
			tb.Peers[j] = table.Peer{
				Addr:        e.Address,
				Port:        e.Port,
				Zone:        e.Zone,
				Preferred:   d.Preferred != nil && d.Preferred[j],
				Ready:       e.Ready,
				Serving:     e.Serving,
				Terminating: e.Terminating,
			}
		}
	}
	return t, decisions
}

// Zone labels of a Node, newest first.
const (
	LabelZone       = "topology.kubernetes.io/zone"
	LabelZoneLegacy = "failure-domain.beta.kubernetes.io/zone"
)

// OfNode is the zone a Node's labels give, "" for none or a nil Node.
func OfNode(n *core_v1.Node) string {
	if n == nil {
		return ""
	}
	if z := n.Labels[LabelZone]; z != "" {
		return z
	}
	return n.Labels[LabelZoneLegacy]
}

// Replicas counts the ready endpoints of a Service per zone: with the
// controller's own Service (--publish-service) it gives the ingress
// replicas per zone for balanced mode. Zones come from the endpoints, else
// from their Nodes' labels.
func Replicas(s *store.Snapshot, service types.NamespacedName) map[string]int {
	slices := s.EndpointSlices[service]
	if len(slices) == 0 {
		return nil
	}
	counts := map[string]int{}
	for _, slice := range slices {
		for i := range slice.Endpoints {
			e := &slice.Endpoints[i]
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			z := ""
			if e.Zone != nil {
				z = *e.Zone
			} else if e.NodeName != nil {
				z = OfNode(s.Nodes[*e.NodeName])
			}
			counts[z]++
		}
	}
	return counts
}
