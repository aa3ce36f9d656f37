package model

import "testing"

// backendIngress routes shop.example.com/ to one service backend, given as
// the YAML of the backend's service block (name and port).
func backendIngress(service string) string {
	return `
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
spec:
  ingressClassName: zonal
  rules:
  - host: shop.example.com
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
` + service + `
`
}

func TestBackends(t *testing.T) {
	runCases(t, map[string]buildCase{
		"port by name: the slice port of the same name gives the target port": {
			objs: backendIngress(`
            name: web
            port:
              name: http`),
			want: `
				server shop.example.com
				   / -> default-web-http (default/shop Prefix)
				backend default-web-http default/web:http
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"port by number of an unnamed port: the unnamed slice port": {
			objs: backendIngress(`
            name: api
            port:
              number: 80`),
			want: `
				server shop.example.com
				   / -> default-api-80 (default/shop Prefix)
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
			`,
		},
		"a Service with several ports: only the slice port of the right name": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: app
				spec:
				  selector:
				    app: app
				  ports:
				  - name: http
				    port: 80
				    targetPort: web
				  - name: metrics
				    port: 9100
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: app-1
				  labels:
				    kubernetes.io/service-name: app
				addressType: IPv4
				ports:
				- name: metrics
				  port: 9100
				- name: http
				  port: 3000
				endpoints:
				- addresses: ["10.0.3.1"]
				---` + backendIngress(`
            name: app
            port:
              number: 80`),
			want: `
				server shop.example.com
				   / -> default-app-80 (default/shop Prefix)
				backend default-app-80 default/app:80
				  10.0.3.1:3000 ready
			`,
		},
		"missing Service: the path is left out, another path serves": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "Prefix / web", "Prefix /cart cart"),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/shop spec.rules[0].http.paths[1].backend.service.name
			`,
			says: []string{"Service default/cart does not exist; the path is left out: create the Service or fix service.name"},
		},
		"missing port number": {
			objs: backendIngress(`
            name: web
            port:
              number: 8080`),
			want: `
				server shop.example.com
				problem Ingress default/shop spec.rules[0].http.paths[0].backend.service.port
			`,
			says: []string{`Service default/web has no port "8080" (it has ports 80 (http))`},
		},
		"missing port name": {
			objs: backendIngress(`
            name: web
            port:
              name: https`),
			want: `
				server shop.example.com
				problem Ingress default/shop spec.rules[0].http.paths[0].backend.service.port
			`,
			says: []string{`Service default/web has no port "https"`},
		},
		"a backend without a port": {
			objs: backendIngress(`
            name: web`),
			want: `
				server shop.example.com
				problem Ingress default/shop spec.rules[0].http.paths[0].backend.service.port
			`,
			says: []string{"the backend for Service default/web names no port"},
		},
		"a Service without ports": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: headless
				spec:
				  clusterIP: None
				  selector:
				    app: headless
				---` + backendIngress(`
            name: headless
            port:
              number: 80`),
			want: `
				server shop.example.com
				problem Ingress default/shop spec.rules[0].http.paths[0].backend.service.port
			`,
			says: []string{`Service default/headless has no port "80" (it has no ports)`},
		},
		"ExternalName Service is unsupported": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: legacy
				spec:
				  type: ExternalName
				  externalName: legacy.example.net
				  ports:
				  - port: 80
				---` + backendIngress(`
            name: legacy
            port:
              number: 80`),
			want: `
				server shop.example.com
				problem Ingress default/shop spec.rules[0].http.paths[0].backend.service.name
			`,
			says: []string{"Service default/legacy is of type ExternalName, which zonal does not support"},
		},
		"resource backend is unsupported": {
			objs: `
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: assets
				spec:
				  ingressClassName: zonal
				  rules:
				  - host: shop.example.com
				    http:
				      paths:
				      - path: /static
				        pathType: Prefix
				        backend:
				          resource:
				            apiGroup: k8s.example.com
				            kind: StorageBucket
				            name: static-assets
			`,
			want: `
				server shop.example.com
				problem Ingress default/assets spec.rules[0].http.paths[0].backend.resource
			`,
			says: []string{"resource backends (StorageBucket static-assets) are not supported"},
		},
		"IPv6 and dual-stack endpoints, IPv4 first": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: dual
				spec:
				  ipFamilyPolicy: PreferDualStack
				  selector:
				    app: dual
				  ports:
				  - name: http
				    port: 80
				    targetPort: 8080
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: dual-v6
				  labels:
				    kubernetes.io/service-name: dual
				addressType: IPv6
				ports:
				- name: http
				  port: 8080
				endpoints:
				- addresses: ["fd00::20"]
				  zone: zone-b
				- addresses: ["fd00::3"]
				  zone: zone-a
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: dual-v4
				  labels:
				    kubernetes.io/service-name: dual
				addressType: IPv4
				ports:
				- name: http
				  port: 8080
				endpoints:
				- addresses: ["10.0.4.1"]
				  zone: zone-a
				---` + backendIngress(`
            name: dual
            port:
              name: http`),
			want: `
				server shop.example.com
				   / -> default-dual-http (default/shop Prefix)
				backend default-dual-http default/dual:http
				  10.0.4.1:8080 zone=zone-a ready
				  [fd00::3]:8080 zone=zone-a ready
				  [fd00::20]:8080 zone=zone-b ready
			`,
		},
		"ready endpoints only, terminating ones are left out": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: rolling
				spec:
				  ports:
				  - port: 80
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: rolling-1
				  labels:
				    kubernetes.io/service-name: rolling
				addressType: IPv4
				ports:
				- port: 80
				endpoints:
				- addresses: ["10.0.5.1"]
				  conditions: {ready: true, serving: true, terminating: false}
				- addresses: ["10.0.5.2"]
				  conditions: {ready: false, serving: true, terminating: true}
				- addresses: ["10.0.5.3"]
				  conditions: {ready: false, serving: false, terminating: false}
				- addresses: ["10.0.5.4"]
				---` + backendIngress(`
            name: rolling
            port:
              number: 80`),
			want: `
				server shop.example.com
				   / -> default-rolling-80 (default/shop Prefix)
				backend default-rolling-80 default/rolling:80
				  10.0.5.1:80 ready
				  10.0.5.4:80 ready
			`,
		},
		"none ready: serving-and-terminating endpoints instead": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: draining
				spec:
				  ports:
				  - port: 80
				    targetPort: 8080
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: draining-1
				  labels:
				    kubernetes.io/service-name: draining
				addressType: IPv4
				ports:
				- port: 8080
				endpoints:
				- addresses: ["10.0.6.1"]
				  conditions: {ready: false, serving: true, terminating: true}
				- addresses: ["10.0.6.2"]
				  conditions: {ready: false, serving: false, terminating: true}
				- addresses: ["10.0.6.3"]
				  conditions: {ready: false, serving: true, terminating: false}
				---` + backendIngress(`
            name: draining
            port:
              number: 80`),
			want: `
				server shop.example.com
				   / -> default-draining-80 (default/shop Prefix)
				backend default-draining-80 default/draining:80
				  10.0.6.1:8080 serving terminating
			`,
		},
		"no usable endpoint: still a backend (NGINX answers 503)": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: scaled-down
				spec:
				  selector:
				    app: scaled-down
				  ports:
				  - port: 80
				---` + backendIngress(`
            name: scaled-down
            port:
              number: 80`),
			want: `
				server shop.example.com
				   / -> default-scaled-down-80 (default/shop Prefix)
				backend default-scaled-down-80 default/scaled-down:80
			`,
		},
		"zones from the endpoint, else the Node's labels": {
			objs: `
				apiVersion: v1
				kind: Node
				metadata:
				  name: node-1
				  labels:
				    topology.kubernetes.io/zone: eu-west-1a
				    failure-domain.beta.kubernetes.io/zone: ignored
				---
				apiVersion: v1
				kind: Node
				metadata:
				  name: node-2
				  labels:
				    failure-domain.beta.kubernetes.io/zone: eu-west-1b
				---
				apiVersion: v1
				kind: Node
				metadata:
				  name: node-3
				---
				apiVersion: v1
				kind: Service
				metadata:
				  name: zoned
				spec:
				  ports:
				  - port: 80
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: zoned-1
				  labels:
				    kubernetes.io/service-name: zoned
				addressType: IPv4
				ports:
				- port: 80
				endpoints:
				- addresses: ["10.0.7.1"]
				  nodeName: node-1
				  zone: eu-west-1c
				- addresses: ["10.0.7.2"]
				  nodeName: node-1
				- addresses: ["10.0.7.3"]
				  nodeName: node-2
				- addresses: ["10.0.7.4"]
				  nodeName: node-3
				- addresses: ["10.0.7.5"]
				  nodeName: node-unknown
				- addresses: ["10.0.7.6"]
				---` + backendIngress(`
            name: zoned
            port:
              number: 80`),
			want: `
				server shop.example.com
				   / -> default-zoned-80 (default/shop Prefix)
				backend default-zoned-80 default/zoned:80
				  10.0.7.1:80 zone=eu-west-1c node=node-1 ready
				  10.0.7.2:80 zone=eu-west-1a node=node-1 ready
				  10.0.7.3:80 zone=eu-west-1b node=node-2 ready
				  10.0.7.4:80 node=node-3 ready
				  10.0.7.5:80 node=node-unknown ready
				  10.0.7.6:80 ready
			`,
		},
		"topology: annotations, trafficDistribution and hints": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: hinted
				  annotations:
				    zonal.dev/zone-mode: balanced
				    service.kubernetes.io/topology-mode: Auto
				spec:
				  trafficDistribution: PreferSameZone
				  ports:
				  - port: 80
				---
				apiVersion: v1
				kind: Service
				metadata:
				  name: older
				  annotations:
				    service.kubernetes.io/topology-aware-hints: auto
				spec:
				  ports:
				  - port: 80
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: hinted-1
				  labels:
				    kubernetes.io/service-name: hinted
				addressType: IPv4
				ports:
				- port: 80
				endpoints:
				- addresses: ["10.0.8.1"]
				  zone: zone-a
				  hints:
				    forZones:
				    - name: zone-a
				    - name: zone-c
				- addresses: ["10.0.8.2"]
				  zone: zone-b
				  hints:
				    forZones:
				    - name: zone-b
				---
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: shop
				spec:
				  ingressClassName: zonal
				  rules:
				  - host: shop.example.com
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: hinted
				            port:
				              number: 80
				      - path: /old
				        pathType: Prefix
				        backend:
				          service:
				            name: older
				            port:
				              number: 80
			`,
			want: `
				server shop.example.com
				   / -> default-hinted-80 (default/shop Prefix)
				  = /old -> default-older-80 (default/shop Prefix)
				   /old/ -> default-older-80 (default/shop Prefix)
				backend default-hinted-80 default/hinted:80 zone-mode=balanced traffic=PreferSameZone topology=Auto
				  10.0.8.1:80 zone=zone-a ready hints=zone-a,zone-c
				  10.0.8.2:80 zone=zone-b ready hints=zone-b
				backend default-older-80 default/older:80 topology=auto
			`,
		},
		"duplicates across slices are kept once, from the first slice": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: moving
				spec:
				  ports:
				  - port: 80
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: moving-b
				  labels:
				    kubernetes.io/service-name: moving
				addressType: IPv4
				ports:
				- port: 80
				endpoints:
				- addresses: ["10.0.9.1"]
				  zone: from-b
				- addresses: ["10.0.9.2"]
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: moving-a
				  labels:
				    kubernetes.io/service-name: moving
				addressType: IPv4
				ports:
				- port: 80
				endpoints:
				- addresses: ["10.0.9.1"]
				  zone: from-a
				- addresses: ["10.0.9.1"]
				  zone: from-a-again
				---` + backendIngress(`
            name: moving
            port:
              number: 80`),
			want: `
				server shop.example.com
				   / -> default-moving-80 (default/shop Prefix)
				backend default-moving-80 default/moving:80
				  10.0.9.1:80 zone=from-a ready
				  10.0.9.2:80 ready
			`,
		},
		"FQDN slices, unparsable addresses and extra addresses are skipped": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: odd
				spec:
				  ports:
				  - port: 80
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: odd-fqdn
				  labels:
				    kubernetes.io/service-name: odd
				addressType: FQDN
				ports:
				- port: 80
				endpoints:
				- addresses: ["db.example.net"]
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: odd-v4
				  labels:
				    kubernetes.io/service-name: odd
				addressType: IPv4
				ports:
				- port: 80
				endpoints:
				- addresses: ["10.0.10.1", "10.0.10.99"]
				- addresses: ["10.0.10.300"]
				- addresses: ["not-an-ip"]
				- addresses: ["fe80::1%eth0"]
				---
				apiVersion: discovery.k8s.io/v1
				kind: EndpointSlice
				metadata:
				  name: odd-other-port
				  labels:
				    kubernetes.io/service-name: odd
				addressType: IPv4
				ports:
				- name: metrics
				  port: 9100
				endpoints:
				- addresses: ["10.0.10.2"]
				---` + backendIngress(`
            name: odd
            port:
              number: 80`),
			want: `
				server shop.example.com
				   / -> default-odd-80 (default/shop Prefix)
				backend default-odd-80 default/odd:80
				  10.0.10.1:80 ready
			`,
		},
		"one Service port by number and by name: two backends": {
			objs: pathIngress("shop", "2025-01-01T00:00:00Z", "Prefix / web") + `
      - path: /by-name
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              name: http
`,
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
				  = /by-name -> default-web-http (default/shop Prefix)
				   /by-name/ -> default-web-http (default/shop Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				backend default-web-http default/web:http
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"two Service ports with one backend name: the first keeps it": {
			objs: `
				apiVersion: v1
				kind: Service
				metadata:
				  name: b-c
				  namespace: a
				spec:
				  ports:
				  - port: 80
				---
				apiVersion: v1
				kind: Service
				metadata:
				  name: c
				  namespace: a-b
				spec:
				  ports:
				  - port: 80
				---
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: first
				  namespace: a
				  creationTimestamp: "2025-01-01T00:00:00Z"
				spec:
				  ingressClassName: zonal
				  rules:
				  - host: a.example.com
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: b-c
				            port:
				              number: 80
				---
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: second
				  namespace: a-b
				  creationTimestamp: "2025-02-01T00:00:00Z"
				spec:
				  ingressClassName: zonal
				  rules:
				  - host: ab.example.com
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: c
				            port:
				              number: 80
			`,
			want: `
				server a.example.com
				   / -> a-b-c-80 (a/first Prefix)
				server ab.example.com
				backend a-b-c-80 a/b-c:80
				problem Ingress a-b/second spec.rules[0].http.paths[0].backend.service.name
			`,
			says: []string{"backend name a-b-c-80 of Service a-b/c port 80 is already the name of Service a/b-c port 80"},
		},
	})
}
