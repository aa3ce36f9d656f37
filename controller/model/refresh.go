package model

import (
	core_v1 "k8s.io/api/core/v1"

	"github.com/zonal-ingress/zonal/controller/store"
)

// RefreshEndpoints returns m with every backend's endpoints read afresh from
// s, sharing everything else with m. It equals what Build would return for
// s when s differs from m's snapshot only in EndpointSlices and Nodes: those
// decide endpoints and their zones, never servers, locations, backends or
// problems. It costs a fraction of Build, which is what keeps an endpoint
// change fast in a large cluster.
func RefreshEndpoints(m *Model, s *store.Snapshot) *Model {
	out := *m
	out.Backends = make([]Backend, len(m.Backends))
	b := &builder{s: s}
	for i := range m.Backends {
		nb := m.Backends[i]
		be := backend{
			key:  backendKey{service: nb.Service},
			port: &core_v1.ServicePort{Name: nb.portName},
		}
		nb.Endpoints = b.endpoints(&be)
		out.Backends[i] = nb
	}
	return &out
}
