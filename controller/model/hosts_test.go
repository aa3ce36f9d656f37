package model

import (
	"strings"
	"testing"
)

func TestHostError(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	long := strings.Repeat(label63+".", 4)[:254] // 254 characters

	cases := map[string]struct {
		host  string
		valid bool
	}{
		"name":                      {"shop.example.com", true},
		"single label":              {"localhost", true},
		"digits and hyphens":        {"a-1.b2-c.example", true},
		"label of 63":               {label63 + ".com", true},
		"253 characters":            {long[:253], true},
		"wildcard":                  {"*.example.com", true},
		"wildcard of a single name": {"*.internal", true},
		"254 characters":            {long, false},
		"label of 64":               {label63 + "a.com", false},
		"uppercase":                 {"Shop.example.com", false},
		"underscore":                {"shop_1.example.com", false},
		"leading hyphen":            {"-shop.example.com", false},
		"trailing hyphen":           {"shop-.example.com", false},
		"trailing hyphen at end":    {"shop.example-", false},
		"empty label":               {"shop..example.com", false},
		"leading dot":               {".example.com", false},
		"trailing dot":              {"shop.example.com.", false},
		"bare wildcard":             {"*", false},
		"wildcard dot only":         {"*.", false},
		"wildcard inside":           {"shop.*.example.com", false},
		"partial wildcard":          {"*shop.example.com", false},
		"double wildcard":           {"*.*.example.com", false},
		"port":                      {"shop.example.com:8080", false},
		"space":                     {"shop example.com", false},
		"nginx syntax":              {"shop.example.com;", false},
		"regex server_name":         {"~^shop", false},
		"unicode":                   {"bücher.example", false},
		"empty":                     {"", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			reason := hostError(tc.host)
			if (reason == "") != tc.valid {
				t.Errorf("hostError(%q) = %q, want valid=%t", tc.host, reason, tc.valid)
			}
		})
	}
}

func TestHosts(t *testing.T) {
	runCases(t, map[string]buildCase{
		"one server per host, sorted, rules without host on the default server": {
			objs: `
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: sites
				spec:
				  ingressClassName: zonal
				  rules:
				  - host: www.example.com
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: web
				            port:
				              number: 80
				  - host: api.example.com
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: api
				            port:
				              number: 80
				  - http:
				      paths:
				      - path: /healthz
				        pathType: Exact
				        backend:
				          service:
				            name: web
				            port:
				              number: 80
			`,
			want: `
				server ""
				  = /healthz -> default-web-80 (default/sites Exact)
				server api.example.com
				   / -> default-api-80 (default/sites Prefix)
				server www.example.com
				   / -> default-web-80 (default/sites Prefix)
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"wildcard host is its own server": {
			objs: `
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: tenants
				spec:
				  ingressClassName: zonal
				  rules:
				  - host: "*.example.com"
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: web
				            port:
				              number: 80
				  - host: example.com
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: api
				            port:
				              number: 80
			`,
			want: `
				server *.example.com
				   / -> default-web-80 (default/tenants Prefix)
				server example.com
				   / -> default-api-80 (default/tenants Prefix)
				backend default-api-80 default/api:80
				  10.0.2.1:9090 zone=zone-b node=node-b ready
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
			`,
		},
		"bad hosts leave out their rules, the good rule is served": {
			objs: `
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: mixed
				spec:
				  ingressClassName: zonal
				  rules:
				  - host: Shop.Example.com
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: web
				            port:
				              number: 80
				  - host: "shop.example.com;include /etc/passwd"
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: web
				            port:
				              number: 80
				  - host: good.example.com
				    http:
				      paths:
				      - path: /
				        pathType: Prefix
				        backend:
				          service:
				            name: web
				            port:
				              number: 80
				  - host: "foo.*.example.com"
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
				server good.example.com
				   / -> default-web-80 (default/mixed Prefix)
				backend default-web-80 default/web:80
				  10.0.1.1:8080 zone=zone-a node=node-a ready
				problem Ingress default/mixed spec.rules[0].host
				problem Ingress default/mixed spec.rules[1].host
				problem Ingress default/mixed spec.rules[3].host
			`,
			says: []string{
				`host "Shop.Example.com" has uppercase letters`,
				`host "shop.example.com;include /etc/passwd" has a character other than`,
				`host "foo.*.example.com" has a '*' that is not a leading "*." wildcard label`,
			},
		},
		"a host without paths still gets a server": {
			objs: `
				apiVersion: networking.k8s.io/v1
				kind: Ingress
				metadata:
				  name: parked
				spec:
				  ingressClassName: zonal
				  rules:
				  - host: parked.example.com
			`,
			want: `
				server parked.example.com
			`,
		},
	})
}
