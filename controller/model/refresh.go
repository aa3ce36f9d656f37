package model

import (
	"reflect"

	core_v1 "k8s.io/api/core/v1"

	"github.com/zonal-ingress/zonal/controller/store"
)

// RefreshEndpoints returns m with the endpoints of its backends read afresh
// from after, sharing everything else with m. It equals what Build would
// return for after when after differs from before, the snapshot m was built
// from, only in EndpointSlices and Nodes: those decide endpoints and their
// zones, never servers, locations, backends or problems.
//
// Only the backends whose Service's EndpointSlices changed are read again
// (all of them when a Node changed, or before is nil): the store replaces
// a Service's map of slices whenever one of them changes, and shares the
// maps that did not change between snapshots. An endpoint change in a
// large cluster thus costs what that one Service costs.
func RefreshEndpoints(m *Model, before, after *store.Snapshot) *Model {
	all := before == nil || !sameMap(before.Nodes, after.Nodes)
	out := *m
	out.Backends = make([]Backend, len(m.Backends))
	b := &builder{s: after}
	for i := range m.Backends {
		nb := m.Backends[i]
		if all || !sameMap(before.EndpointSlices[nb.Service], after.EndpointSlices[nb.Service]) {
			be := backend{
				key:  backendKey{service: nb.Service},
				port: &core_v1.ServicePort{Name: nb.portName},
			}
			nb.Endpoints = b.endpoints(&be)
		}
		out.Backends[i] = nb
	}
	return &out
}

// sameMap tells whether a and b are the same map object (not just equal).
func sameMap[K comparable, V any](a, b map[K]V) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}
