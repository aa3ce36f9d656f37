// Package store holds the Kubernetes objects the controller watches, as the
// informers deliver them, and hands out consistent snapshots for the model
// builder. It performs no API calls of its own.
package store

import (
	core_v1 "k8s.io/api/core/v1"
	discovery_v1 "k8s.io/api/discovery/v1"
	networking_v1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Snapshot is a point-in-time view of every watched object. The maps and
// the objects they point to are shared and must not be modified: informers
// replace objects, they never change them in place.
type Snapshot struct {
	IngressClasses map[string]*networking_v1.IngressClass
	Ingresses      map[types.NamespacedName]*networking_v1.Ingress
	Services       map[types.NamespacedName]*core_v1.Service
	// EndpointSlices are grouped by the Service they belong to (label
	// kubernetes.io/service-name), then keyed by slice name. A Service's
	// map of slices is a new map whenever one of its slices changed, and
	// the same map as in the previous snapshot otherwise (as is every map
	// of a kind that did not change): model.RefreshEndpoints relies on it.
	EndpointSlices map[types.NamespacedName]map[string]*discovery_v1.EndpointSlice
	Secrets        map[types.NamespacedName]*core_v1.Secret
	Nodes          map[string]*core_v1.Node
	// ConfigMap is the controller's global settings, nil if absent.
	ConfigMap *core_v1.ConfigMap
}

// NewSnapshot returns an empty snapshot with every map allocated, for tests
// and for a controller that has seen nothing yet.
func NewSnapshot() *Snapshot {
	return &Snapshot{
		IngressClasses: map[string]*networking_v1.IngressClass{},
		Ingresses:      map[types.NamespacedName]*networking_v1.Ingress{},
		Services:       map[types.NamespacedName]*core_v1.Service{},
		EndpointSlices: map[types.NamespacedName]map[string]*discovery_v1.EndpointSlice{},
		Secrets:        map[types.NamespacedName]*core_v1.Secret{},
		Nodes:          map[string]*core_v1.Node{},
	}
}
