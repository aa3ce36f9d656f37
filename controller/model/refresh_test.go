package model

import (
	"reflect"
	"testing"
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
	before := Build(snapshot(t, []string{"base.yaml"}, ingress), testOptions)
	after := snapshot(t, []string{"base.yaml"}, ingress+moreEndpoints)

	want := Build(after, testOptions)
	got := RefreshEndpoints(before, after)
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
