// Package model turns a snapshot of Kubernetes objects into what NGINX must
// serve: one server per host with its locations, the backends they proxy to
// with their endpoints, and the problems that kept objects out. Build is a
// pure function: no I/O, no API calls, so every rule is tested with fixtures.
package model

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/types"
)

// Model is the desired state of the data plane.
type Model struct {
	// Servers has one entry per host, sorted by Host. The server with Host
	// "" holds the rules without a host and answers any host no other
	// server names.
	Servers []Server
	// DefaultBackend serves requests that match no location: from
	// --default-backend-service, else the oldest Ingress's
	// spec.defaultBackend; "" for none (NGINX answers 404).
	DefaultBackend string
	// Backends has every backend a location or the default backend names,
	// sorted by Name.
	Backends []Backend
	// Problems lists what was left out and why, for logs and Events.
	Problems []Problem
}

// Server is one virtual host.
type Server struct {
	// Host is an RFC 1123 name, or "*." and one, or "" for the default.
	Host string
	// TLS is the certificate for Host, nil for plain HTTP only.
	TLS *TLS
	// SSLRedirect sends plain HTTP requests to HTTPS (needs TLS).
	SSLRedirect bool
	// Locations are NGINX location blocks, sorted by Path, exact blocks
	// first; no two have the same Exact and Path.
	Locations []Location
}

// Location is one NGINX location block of a server, routing to a backend.
//
// Ingress paths map onto blocks so that NGINX's longest-prefix matching
// gives the Ingress semantics: PathType Exact /foo is the exact block
// "= /foo"; Prefix /foo (whole path elements: /foo, /foo/, /foo/bar, never
// /foobar) is the exact block "= /foo" plus the prefix block "/foo/", and
// Prefix / is the prefix block "/"; ImplementationSpecific /foo is NGINX's
// own prefix block "/foo" (which matches /foobar too). When two rules
// produce the same block, an Exact path beats the exact block of a Prefix
// path, and otherwise the oldest Ingress wins.
type Location struct {
	// Exact is an exact block (location = Path), else a prefix block.
	Exact bool
	Path  string
	// Backend names an entry of Model.Backends.
	Backend string
	// Ingress is where the rule came from, and PathType its path type.
	Ingress  types.NamespacedName
	PathType string
}

// TLS is a certificate and key, validated as a pair, from a Secret.
type TLS struct {
	Secret types.NamespacedName
	Cert   []byte // PEM chain
	Key    []byte // PEM
}

// Backend is one Service port: the unit the endpoint table and the NGINX
// module know by name.
type Backend struct {
	// Name is <namespace>-<service>-<port>, the port as the Ingress gives
	// it (number or name).
	Name    string
	Service types.NamespacedName
	Port    string
	// ZoneMode is the Service's zonal.dev/zone-mode annotation, "" if none.
	ZoneMode string
	// TrafficDistribution and TopologyMode carry the Service's topology
	// request (spec.trafficDistribution, annotation
	// service.kubernetes.io/topology-mode) for the zone policy.
	TrafficDistribution string
	TopologyMode        string
	// Endpoints are ready ones, or serving-and-terminating ones when none
	// is ready; sorted by Address, then Port.
	Endpoints []Endpoint

	// portName is the Service port's name, which selects the port of the
	// EndpointSlices (see RefreshEndpoints).
	portName string
}

// Endpoint is one address of a backend with its target port.
type Endpoint struct {
	Address netip.Addr
	Port    uint16
	// Zone is the EndpointSlice's endpoints[].zone, else the zone label of
	// its Node, else "".
	Zone        string
	NodeName    string
	Ready       bool
	Serving     bool
	Terminating bool
	// ForZones are the EndpointSlice's hints.forZones.
	ForZones []string
}

// Problem is an object, or a part of one, that the model left out.
type Problem struct {
	Kind      string // Ingress, Service, Secret, IngressClass
	Namespace string
	Name      string
	// Field is the path of the offending field, e.g.
	// spec.rules[0].http.paths[1].path; "" for the whole object.
	Field   string
	Message string
}

// Options are the controller flags that shape the model.
type Options struct {
	// IngressClass is the IngressClass name this controller serves.
	IngressClass string
	// ControllerClass is the spec.controller value of the IngressClasses
	// this controller serves.
	ControllerClass string
	// WatchIngressWithoutClass also serves Ingresses with no class.
	WatchIngressWithoutClass bool
	// DefaultBackendService is the Service (namespace/name, its first
	// port) for unmatched requests; zero for none.
	DefaultBackendService types.NamespacedName
	// SSLRedirect redirects plain HTTP to HTTPS on every TLS host, unless
	// an Ingress says otherwise.
	SSLRedirect bool
	// Certificates, when set, remembers validated TLS Secrets from one
	// Build to the next (see CertCache); nil validates every Secret on
	// every Build. Not a flag: the controller keeps one for its lifetime.
	Certificates *CertCache
}

// Annotations zonal reads.
const (
	// AnnotationSSLRedirect on an Ingress ("true" or "false") asks for, or
	// refuses, the HTTP-to-HTTPS redirect on its TLS hosts, over the global
	// setting. A server-level setting: the oldest Ingress of a host wins.
	AnnotationSSLRedirect = "zonal.dev/ssl-redirect"
	// AnnotationZoneMode on a Service overrides --zone-mode for it.
	AnnotationZoneMode = "zonal.dev/zone-mode"
	// AnnotationIngressClass is the deprecated class annotation, still
	// honoured when spec.ingressClassName is empty.
	AnnotationIngressClass = "kubernetes.io/ingress.class"
)
