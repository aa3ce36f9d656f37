package model

import (
	"maps"
	"reflect"
	"testing"

	discovery_v1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
)

// RefreshEndpoints gives what Build gives when only EndpointSlices and
// Nodes changed.
func TestRefreshEndpointsEqualsBuild(t *testing.T) {
	ingress := `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: default}
spec:
  ingressClassName: zonal
  rules:
  - host: shop.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
`
	moreEndpoints := `
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-second
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080}]
endpoints:
- addresses: ["10.0.1.2"]
  zone: zone-c
- addresses: ["10.0.1.3"]
  nodeName: node-b
  conditions: {ready: false, serving: true, terminating: true}
---
apiVersion: v1
kind: Node
metadata:
  name: node-b
  labels: {topology.kubernetes.io/zone: zone-b}
`
	beforeSnap := snapshot(t, []string{"base.yaml"}, ingress)
	before := Build(beforeSnap, testOptions)
	after := snapshot(t, []string{"base.yaml"}, ingress+moreEndpoints)

	want := Build(after, testOptions)
	got := RefreshEndpoints(before, beforeSnap, after)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("RefreshEndpoints:\n%s\nBuild:\n%s", dump(got), dump(want))
	}
	if reflect.DeepEqual(before.Backends, got.Backends) {
		t.Fatal("the fixture changed no endpoint: the test proves nothing")
	}
	if len(before.Backends[1].Endpoints) != 1 {
		t.Errorf("RefreshEndpoints changed the model it started from: %+v", before.Backends[1])
	}
}

// Backends whose Service's slices are the same map as before keep their
// endpoints; the others are read again.
func TestRefreshEndpointsReadsOnlyChangedServices(t *testing.T) {
	before := snapshot(t, []string{"base.yaml"}, `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: shop, namespace: default}
spec:
  ingressClassName: zonal
  rules:
  - host: shop.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {name: http}}}}
      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
`)
	m := Build(before, testOptions)

	// A snapshot as the store makes it: the outer map copied, web's map of
	// slices replaced (here emptied), api's shared.
	after := *before
	after.EndpointSlices = maps.Clone(before.EndpointSlices)
	web := types.NamespacedName{Namespace: "default", Name: "web"}
	after.EndpointSlices[web] = map[string]*discovery_v1.EndpointSlice{}

	got := RefreshEndpoints(m, before, &after)
	api, webBackend := got.Backends[0], got.Backends[1]
	if len(webBackend.Endpoints) != 0 {
		t.Errorf("web's slices changed but its endpoints stay: %+v", webBackend.Endpoints)
	}
	if len(api.Endpoints) == 0 || &api.Endpoints[0] != &m.Backends[0].Endpoints[0] {
		t.Errorf("api's slices did not change but its endpoints were read again")
	}
}
