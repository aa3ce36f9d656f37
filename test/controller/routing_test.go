package controller

import (
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/test/harness"
)

// routes is a shop with Prefix, Exact and nested paths on one host, a
// second host, a wildcard host and rules without a host.
const routes = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: shop
spec:
  ingressClassName: zonal
  rules:
  - host: shop.example.test
    http:
      paths:
      - path: /foo
        pathType: Prefix
        backend:
          service:
            name: foo
            port:
              number: 80
      - path: /foo/bar
        pathType: Prefix
        backend:
          service:
            name: foobar
            port:
              name: http
      - path: /exact
        pathType: Exact
        backend:
          service:
            name: exact
            port:
              number: 80
  - host: api.example.test
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: api
            port:
              number: 80
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: wildcard
  namespace: shop
spec:
  ingressClassName: zonal
  rules:
  - host: "*.example.test"
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: wild
            port:
              number: 80
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: any-host
  namespace: shop
spec:
  ingressClassName: zonal
  rules:
  - http:
      paths:
      - path: /nohost
        pathType: Prefix
        backend:
          service:
            name: nohost
            port:
              number: 80
`

// routingManifests starts a backend for each Service routes names, and
// those named extra, on 127.0.0.<first>..., and returns manifests with
// routes and the Services.
func routingManifests(t *testing.T, first int, extra ...string) manifests {
	names := append([]string{"foo", "foobar", "exact", "api", "wild", "nohost"}, extra...)
	bs := backends(t, first, names...)
	var svcs []string
	for _, name := range names {
		svcs = append(svcs, service("shop", name, bs[name]))
	}
	return manifests{"class.yaml": ingressClass, "services.yaml": docs(svcs...), "ingress.yaml": routes}
}

func TestRouting(t *testing.T) {
	t.Parallel()
	files := routingManifests(t, 21)
	c := start(t, nil, files)
	hc := c.Client(harness.ClientOptions{})

	// URL → the backend that must answer, "" for NGINX's own 404.
	cases := []struct{ name, url, want string }{
		{"prefix: the path", "http://shop.example.test/foo", "foo"},
		{"prefix: with a trailing slash", "http://shop.example.test/foo/", "foo"},
		{"prefix: below it", "http://shop.example.test/foo/x/y", "foo"},
		{"prefix: whole elements only", "http://shop.example.test/foobar", ""},
		{"prefix: query", "http://shop.example.test/foo?x=1", "foo"},
		{"longest prefix: the path", "http://shop.example.test/foo/bar", "foobar"},
		{"longest prefix: trailing slash", "http://shop.example.test/foo/bar/", "foobar"},
		{"longest prefix: below it", "http://shop.example.test/foo/bar/baz", "foobar"},
		{"longest prefix: not a longer element", "http://shop.example.test/foo/barx", "foo"},
		{"exact: the path", "http://shop.example.test/exact", "exact"},
		{"exact: query", "http://shop.example.test/exact?a=b", "exact"},
		{"exact: no trailing slash", "http://shop.example.test/exact/", ""},
		{"exact: nothing below", "http://shop.example.test/exact/x", ""},
		{"exact: nothing longer", "http://shop.example.test/exactly", ""},
		{"host without a rule for /", "http://shop.example.test/", ""},
		{"host names are case-insensitive", "http://SHOP.Example.test/foo", "foo"},
		{"second host: /", "http://api.example.test/", "api"},
		{"second host: any path", "http://api.example.test/v1/items?id=7", "api"},
		{"second host: not the first's paths", "http://api.example.test/foo", "api"},
		{"wildcard: one label", "http://a.example.test/", "wild"},
		{"wildcard: one label, any path", "http://x-1.example.test/foo", "wild"},
		{"wildcard: not two labels", "http://a.b.example.test/", ""},
		{"wildcard: not the bare domain", "http://example.test/", ""},
		{"exact host beats the wildcard", "http://api.example.test/z", "api"},
		{"no host: unknown host", "http://unknown.test/nohost", "nohost"},
		{"no host: below", "http://unknown.test/nohost/x", "nohost"},
		{"no host: an IP address as host", "http://127.0.0.1/nohost", "nohost"},
		{"no host: a host two labels under the wildcard", "http://a.b.example.test/nohost", "nohost"},
		// As in ingress-nginx, rules without a host form the default
		// server, which answers only hosts that no other server names
		// (model.Model.Servers).
		{"no host: not on a named host", "http://shop.example.test/nohost", ""},
		{"unmatched path", "http://unknown.test/", ""},
		{"unmatched path, deeper", "http://unknown.test/foo", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { expectRoute(t, hc, tc.url, tc.want) })
	}
}

// TestRequestPassedIntact checks that NGINX passes the method, the request
// target (path with its escapes, and query), the Host and the client's
// headers and body on to the backend unchanged.
func TestRequestPassedIntact(t *testing.T) {
	t.Parallel()
	files := routingManifests(t, 41)
	c := start(t, nil, files)
	hc := c.Client(harness.ClientOptions{})

	const target = "/foo/a%2Fb/c%20d/e.json?x=1&y=a%20b&x=2&empty=&z"
	for _, method := range []string{"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"} {
		t.Run(method, func(t *testing.T) {
			var body string
			if method == "POST" || method == "PUT" || method == "PATCH" {
				body = `{"order": 42}`
			}
			req, err := http.NewRequest(method, "http://shop.example.test"+target, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body == "" {
				req.Body = nil
			}
			req.Header.Set("User-Agent", "zonal-test/1.0")
			req.Header.Add("X-Custom", "one")
			req.Header.Add("X-Custom", "two, three")
			req.Header.Set("Authorization", "Bearer abc.def")
			req.Header.Set("Cookie", "session=s1; theme=dark")
			req.Header.Set("Accept", "application/json")
			if body != "" {
				req.Header.Set("Content-Type", "application/json")
			}
			r, err := harness.Do(hc, req)
			if err != nil {
				t.Fatal(err)
			}
			if r.Status != http.StatusOK || r.Backend() != "foo" {
				t.Fatalf("%s %s: %s, want 200 from foo", method, target, describe(r))
			}
			e, err := r.Echo()
			if err != nil {
				t.Fatal(err)
			}
			check := func(what, got, want string) {
				t.Helper()
				if got != want {
					t.Errorf("%s: backend got %q, want %q", what, got, want)
				}
			}
			check("method", e.Method, method)
			check("request target", e.URI, target)
			check("Host", e.Host, "shop.example.test")
			check("body", e.Body, body)
			check("User-Agent", e.Header.Get("User-Agent"), "zonal-test/1.0")
			check("Authorization", e.Header.Get("Authorization"), "Bearer abc.def")
			check("Cookie", e.Header.Get("Cookie"), "session=s1; theme=dark")
			check("Accept", e.Header.Get("Accept"), "application/json")
			if got := e.Header.Values("X-Custom"); !slices.Equal(got, []string{"one", "two, three"}) {
				t.Errorf("X-Custom: backend got %q, want [one, two, three] in order", got)
			}
			// What the proxy adds, as documented in nginx.conf.
			check("X-Forwarded-Host", e.Header.Get("X-Forwarded-Host"), "shop.example.test")
			check("X-Forwarded-Proto", e.Header.Get("X-Forwarded-Proto"), "http")
			check("X-Forwarded-For", e.Header.Get("X-Forwarded-For"), "127.0.0.1")
			check("X-Real-Ip", e.Header.Get("X-Real-Ip"), "127.0.0.1")
			if body != "" {
				check("Content-Type", e.Header.Get("Content-Type"), "application/json")
			}
		})
	}
}

// TestDefaultBackend checks where unmatched requests go: to the oldest
// Ingress's spec.defaultBackend, and to --default-backend-service, which
// wins over any Ingress.
func TestDefaultBackend(t *testing.T) {
	t.Parallel()
	const ingressDefault = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: fallback
  namespace: shop
spec:
  ingressClassName: zonal
  defaultBackend:
    service:
      name: ingdefault
      port:
        number: 80
`
	cases := map[string]struct {
		first int
		flags []string
		want  string
	}{
		"spec.defaultBackend":                        {first: 61, want: "ingdefault"},
		"--default-backend-service over the Ingress": {first: 81, flags: []string{"--default-backend-service", "shop/flagdefault"}, want: "flagdefault"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			files := routingManifests(t, tc.first, "ingdefault", "flagdefault")
			files["default.yaml"] = ingressDefault
			c := start(t, tc.flags, files)
			hc := c.Client(harness.ClientOptions{})
			for _, r := range []struct{ url, want string }{
				{"http://unknown.test/", tc.want},
				{"http://unknown.test/anything?q=1", tc.want},
				{"http://shop.example.test/", tc.want},
				{"http://shop.example.test/foobar", tc.want},
				{"http://shop.example.test/exact/x", tc.want},
				{"http://a.b.example.test/", tc.want},
				// Rules still win.
				{"http://shop.example.test/foo/x", "foo"},
				{"http://shop.example.test/exact", "exact"},
				{"http://api.example.test/", "api"},
				{"http://a.example.test/", "wild"},
				{"http://unknown.test/nohost", "nohost"},
			} {
				expectRoute(t, hc, r.url, r.want)
			}
		})
	}
}

// TestLongHostNames serves the longest host names RFC 1123 allows (253
// bytes, labels of 63), exact and wildcard, next to a short one: NGINX's
// server name hash must be sized for them.
func TestLongHostNames(t *testing.T) {
	t.Parallel()
	bs := backends(t, 211, "long", "wild", "short")
	label := strings.Repeat("a", 63)
	long := label + "." + label + "." + label + "." + strings.Repeat("b", 61) // 253 bytes
	wildBase := label + "." + label + "." + strings.Repeat("c", 63) + ".test" // 197 bytes
	c := start(t, nil, manifests{
		"class.yaml":    ingressClass,
		"services.yaml": docs(service("shop", "long", bs["long"]), service("shop", "wild", bs["wild"]), service("shop", "short", bs["short"])),
		"ingress.yaml": docs(
			hostIngress("long", long, "long"),
			hostIngress("wild", "*."+wildBase, "wild"),
			hostIngress("short", "s.test", "short"),
		),
	})
	if line := c.WaitLog(0, 200*time.Millisecond, "left out"); line != "" {
		t.Errorf("a host was left out: %s", line)
	}
	hc := c.Client(harness.ClientOptions{})
	expectRoute(t, hc, "http://"+long+"/", "long")
	expectRoute(t, hc, "http://"+strings.Repeat("d", 55)+"."+wildBase+"/", "wild")
	expectRoute(t, hc, "http://s.test/", "short")
}

// TestIPv6Endpoints proxies to a Service whose EndpointSlice is of
// addressType IPv6.
func TestIPv6Endpoints(t *testing.T) {
	t.Parallel()
	if l, err := net.Listen("tcp6", "[::1]:0"); err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	} else {
		l.Close()
	}
	be := harness.StartEchoBackend(t, "v6", "::1", "zone-a")
	v6 := strings.Replace(service("shop", "v6", be), "addressType: IPv4", "addressType: IPv6", 1)
	c := start(t, nil, manifests{
		"class.yaml":    ingressClass,
		"services.yaml": v6,
		"ingress.yaml":  hostIngress("v6", "v6.test", "v6"),
	})
	hc := c.Client(harness.ClientOptions{})
	expectRoute(t, hc, "http://v6.test/x", "v6")
}
