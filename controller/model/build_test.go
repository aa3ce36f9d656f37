package model

import (
	"reflect"
	"testing"

	discovery_v1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/controller/store"
)

// defaultBackendIngress is an Ingress with only spec.defaultBackend.
func defaultBackendIngress(name, created, service string) string {
	return `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ` + name + `
  creationTimestamp: "` + created + `"
spec:
  ingressClassName: zonal
  defaultBackend:
    service:
      name: ` + service + `
      port:
        number: 80
`
}

func TestDefaultBackend(t *testing.T) {
	flagWeb := testOptions
	flagWeb.DefaultBackendService = types.NamespacedName{Namespace: "default", Name: "web"}
	flagMissing := testOptions
	flagMissing.DefaultBackendService = types.NamespacedName{Namespace: "zonal-system", Name: "fallback"}
	const t0, t1, t2 = "2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z", "2025-03-01T00:00:00Z"

	runCases(t, map[string]buildCase{
		"--default-backend-service, its first port": {
			opts: &flagWeb,
			want: `
				default default-web-80
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"--default-backend-service wins over spec.defaultBackend": {
			opts: &flagWeb,
			objs: defaultBackendIngress("shop", t0, "api"),
			want: `
				default default-web-80
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/shop spec.defaultBackend
			`,
			says: []string{"the default backend is already default-web-80, set by --default-backend-service"},
		},
		"--default-backend-service missing: a problem, and spec.defaultBackend serves": {
			opts: &flagMissing,
			objs: defaultBackendIngress("shop", t0, "api"),
			want: `
				default default-api-80
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
				problem Service zonal-system/fallback
			`,
			says: []string{"--default-backend-service names Service zonal-system/fallback, which does not exist"},
		},
		"--default-backend-service without ports": {
			opts: &flagMissing,
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: fallback
				  namespace: zonal-system
				spec:
				  clusterIP: None
			`,
			want: `
				problem Service zonal-system/fallback
			`,
			says: []string{"which has no ports"},
		},
		"--default-backend-service of type ExternalName": {
			opts: &flagMissing,
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: fallback
				  namespace: zonal-system
				spec:
				  type: ExternalName
				  externalName: fallback.example.net
				  ports:
				  - port: 80
			`,
			want: `
				problem Service zonal-system/fallback
			`,
			says: []string{"--default-backend-service: Service zonal-system/fallback is of type ExternalName"},
		},
		"the oldest Ingress's spec.defaultBackend": {
			objs: defaultBackendIngress("new", t1, "api") + "---" +
				defaultBackendIngress("old", t0, "web") + "---" +
				defaultBackendIngress("same", t2, "web"),
			want: `
				default default-web-80
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/new spec.defaultBackend
			`,
			says: []string{"set by Ingress default/old, which is older"},
		},
		"a broken spec.defaultBackend: the next oldest serves": {
			objs: defaultBackendIngress("new", t1, "api") + "---" +
				defaultBackendIngress("old", t0, "gone"),
			want: `
				default default-api-80
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
				problem Ingress default/old spec.defaultBackend.service.name
			`,
			says: []string{"Service default/gone does not exist; the default backend is left out"},
		},
		"no default backend": {
			objs: pathIngress("shop", t0, "Exact /cart web"),
			want: `
				server shop.example.com
				  = /cart -> default-web-80 (default/shop Exact)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
	})
}

func TestBrokenIngressBreaksNothingElse(t *testing.T) {
	runCases(t, map[string]buildCase{
		"everything wrong in one Ingress, the other is whole": {
			files: []string{"base.yaml", "tls.yaml"},
			objs: `
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: broken
				  creationTimestamp: "2025-01-01T00:00:00Z"
				  annotations:
				    zonal.dev/ssl-redirect: "maybe"
				spec:
				  ingressClassName: zonal
				  defaultBackend:
				    service:
				      name: gone
				      port:
				        number: 80
				  tls:
				  - hosts: ["shop.example.com"]
				    secretName: garbage-tls
				  rules:
				  - host: "shop.example.com}"
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: web
				            port:
				              number: 80
				  - host: shop.example.com
				    http:
				      paths:
				      - path: "/a;b"
				        pathType: Prefix
				        backend:
				          service:
				            name: web
				            port:
				              number: 80
				      - path: /gone
				        pathType: Prefix
				        backend:
				          service:
				            name: gone
				            port:
				              number: 80
				      - path: /web
				        pathType: Prefix
				        backend:
				          service:
				            name: web
				            port:
				              number: 443
				---
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: good
				  creationTimestamp: "2025-02-01T00:00:00Z"
				spec:
				  ingressClassName: zonal
				  defaultBackend:
				    service:
				      name: api
				      port:
				        number: 80
				  tls:
				  - hosts: ["shop.example.com"]
				    secretName: example-tls
				  rules:
				  - host: shop.example.com
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: web
				            port:
				              number: 80
			`,
			want: `
				server shop.example.com tls=default/example-tls
				   / -> default-web-80 (default/good Prefix)
				default default-api-80
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/broken metadata.annotations[zonal.dev/ssl-redirect]
				problem Ingress default/broken spec.defaultBackend.service.name
				problem Ingress default/broken spec.rules[0].host
				problem Ingress default/broken spec.rules[1].http.paths[0].path
				problem Ingress default/broken spec.rules[1].http.paths[1].backend.service.name
				problem Ingress default/broken spec.rules[1].http.paths[2].backend.service.port
				problem Ingress default/broken spec.tls[0].secretName
			`,
		},
	})
}

// TestBuildIsPure builds a generated cluster several times: the models are
// equal (map order never shows), and the snapshot is untouched.
func TestBuildIsPure(t *testing.T) {
	s := generate(200, 400, 10, true)
	before := copySnapshot(s)
	want := Build(s, generatedOptions)
	if len(want.Servers) == 0 || len(want.Backends) != 400 {
		t.Fatalf("generated cluster built %d servers, %d backends; problems:\n%s", len(want.Servers), len(want.Backends), messages(want))
	}
	for i := 0; i < 5; i++ {
		if got := Build(s, generatedOptions); !reflect.DeepEqual(got, want) {
			t.Fatalf("build %d differs from the first", i+2)
		}
	}
	if !reflect.DeepEqual(s, before) {
		t.Fatal("Build changed the snapshot")
	}
}

func copySnapshot(s *store.Snapshot) *store.Snapshot {
	c := store.NewSnapshot()
	for k, v := range s.IngressClasses {
		c.IngressClasses[k] = v.DeepCopy()
	}
	for k, v := range s.Ingresses {
		c.Ingresses[k] = v.DeepCopy()
	}
	for k, v := range s.Services {
		c.Services[k] = v.DeepCopy()
	}
	for k, m := range s.EndpointSlices {
		c.EndpointSlices[k] = map[string]*discovery_v1.EndpointSlice{}
		for n, v := range m {
			c.EndpointSlices[k][n] = v.DeepCopy()
		}
	}
	for k, v := range s.Secrets {
		c.Secrets[k] = v.DeepCopy()
	}
	for k, v := range s.Nodes {
		c.Nodes[k] = v.DeepCopy()
	}
	return c
}
