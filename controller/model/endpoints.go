package model

import (
	"cmp"
	"net/netip"
	"slices"

	core_v1 "k8s.io/api/core/v1"
	discovery_v1 "k8s.io/api/discovery/v1"
)

// candidate is an endpoint address found in an EndpointSlice, before the
// ready-or-fallback choice and deduplication.
type candidate struct {
	addr        netip.Addr
	port        uint16
	ready       bool
	serving     bool
	terminating bool
	src         *discovery_v1.Endpoint
}

// endpoints lists the addresses of be's Service port from the Service's
// EndpointSlices, following the EndpointSlice API:
//
//   - The slice port is the one whose name equals the Service port's name
//     ("" for an unnamed Service port); slices without it are skipped, and so
//     are FQDN slices.
//   - An endpoint's address is its first one (the API defines no meaning for
//     the others, and kube-proxy ignores them); unparsable ones are skipped.
//   - Ready endpoints are used (a nil condition means ready). When none is
//     ready, serving-and-terminating ones are used instead, as kube-proxy
//     does, so that a draining Service still answers.
//   - An address and port listed twice (an endpoint moving between slices)
//     is kept once, from the slice whose name sorts first.
//
// The result is sorted by address, then port.
func (b *builder) endpoints(be *backend) []Endpoint {
	bySlice := b.s.EndpointSlices[be.key.service]
	if len(bySlice) == 0 {
		return nil
	}
	names := b.sliceNames[:0]
	for name := range bySlice {
		names = append(names, name)
	}
	slices.Sort(names)
	b.sliceNames = names

	cands := b.candidates[:0]
	anyReady := false
	for _, name := range names {
		slice := bySlice[name]
		if slice.AddressType == discovery_v1.AddressTypeFQDN {
			continue
		}
		port, ok := slicePort(slice, be.port.Name)
		if !ok {
			continue
		}
		for i := range slice.Endpoints {
			ep := &slice.Endpoints[i]
			if len(ep.Addresses) == 0 {
				continue
			}
			addr, err := netip.ParseAddr(ep.Addresses[0])
			if err != nil || addr.Zone() != "" {
				continue
			}
			c := candidate{
				addr:        addr,
				port:        port,
				ready:       ep.Conditions.Ready == nil || *ep.Conditions.Ready,
				serving:     ep.Conditions.Serving == nil || *ep.Conditions.Serving,
				terminating: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating,
				src:         ep,
			}
			if !c.ready && !(c.serving && c.terminating) {
				continue // never used
			}
			anyReady = anyReady || c.ready
			cands = append(cands, c)
		}
	}
	b.candidates = cands
	if anyReady {
		kept := cands[:0]
		for _, c := range cands {
			if c.ready {
				kept = append(kept, c)
			}
		}
		cands = kept
	}
	if len(cands) == 0 {
		return nil
	}
	// Stable, so that among duplicates the first slice's entry comes first.
	slices.SortStableFunc(cands, func(x, y candidate) int {
		if c := x.addr.Compare(y.addr); c != 0 {
			return c
		}
		return cmp.Compare(x.port, y.port)
	})
	n := 1
	for i := 1; i < len(cands); i++ {
		if cands[i].addr != cands[n-1].addr || cands[i].port != cands[n-1].port {
			n++
		}
	}
	out := make([]Endpoint, 0, n)
	for i, c := range cands {
		if i > 0 && c.addr == cands[i-1].addr && c.port == cands[i-1].port {
			continue
		}
		e := Endpoint{
			Address:     c.addr,
			Port:        c.port,
			Ready:       c.ready,
			Serving:     c.serving,
			Terminating: c.terminating,
		}
		if c.src.NodeName != nil {
			e.NodeName = *c.src.NodeName
		}
		e.Zone = b.endpointZone(c.src, e.NodeName)
		if h := c.src.Hints; h != nil && len(h.ForZones) > 0 {
			start := len(b.zoneNames)
			for _, z := range h.ForZones {
				b.zoneNames = append(b.zoneNames, z.Name)
			}
			// Capped, so that a later append never writes into it.
			e.ForZones = b.zoneNames[start:len(b.zoneNames):len(b.zoneNames)]
		}
		out = append(out, e)
	}
	return out
}

// slicePort is the port of slice whose name is name.
func slicePort(slice *discovery_v1.EndpointSlice, name string) (uint16, bool) {
	for _, p := range slice.Ports {
		pn := ""
		if p.Name != nil {
			pn = *p.Name
		}
		if pn != name {
			continue
		}
		if p.Port == nil || *p.Port <= 0 || *p.Port > 65535 {
			return 0, false
		}
		return uint16(*p.Port), true
	}
	return 0, false
}

// endpointZone is the endpoint's own zone, else its Node's zone label (the
// current one, then the deprecated beta one), else "".
func (b *builder) endpointZone(ep *discovery_v1.Endpoint, nodeName string) string {
	if ep.Zone != nil && *ep.Zone != "" {
		return *ep.Zone
	}
	if nodeName == "" {
		return ""
	}
	node := b.s.Nodes[nodeName]
	if node == nil {
		return ""
	}
	if z := node.Labels[core_v1.LabelTopologyZone]; z != "" {
		return z
	}
	return node.Labels[core_v1.LabelFailureDomainBetaZone]
}
