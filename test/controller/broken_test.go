package controller

import (
	"crypto/tls"
	"net"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/test/harness"
)

// brokenIngresses are three Ingresses with one mistake each, next to
// rules that are fine:
//   - bad-path: a path with ';' (ImplementationSpecific), and a good path;
//   - missing-service: a path to a Service that does not exist, and a good
//     path;
//   - bad-tls: a TLS Secret that holds no certificate.
const brokenIngresses = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: bad-path
  namespace: shop
spec:
  ingressClassName: zonal
  rules:
  - host: broken.test
    http:
      paths:
      - path: /a;b
        pathType: ImplementationSpecific
        backend:
          service:
            name: other
            port:
              number: 80
      - path: /ok
        pathType: Prefix
        backend:
          service:
            name: other
            port:
              number: 80
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: missing-service
  namespace: shop
spec:
  ingressClassName: zonal
  rules:
  - host: broken.test
    http:
      paths:
      - path: /missing
        pathType: Prefix
        backend:
          service:
            name: does-not-exist
            port:
              number: 80
      - path: /fine
        pathType: Exact
        backend:
          service:
            name: other
            port:
              number: 80
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: bad-tls
  namespace: shop
spec:
  ingressClassName: zonal
  tls:
  - hosts: [badtls.test]
    secretName: bad-tls
  rules:
  - host: badtls.test
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: other
            port:
              number: 80
---
apiVersion: v1
kind: Secret
metadata:
  name: bad-tls
  namespace: shop
type: kubernetes.io/tls
stringData:
  tls.crt: "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"
  tls.key: "not a key"
`

// TestBrokenIngress checks that a mistake in one Ingress leaves the rest
// serving, the Ingress's other rules included, and that the controller's
// log names the Ingress and the field: with the broken Ingresses there
// from the start, and added to a running controller.
func TestBrokenIngress(t *testing.T) {
	t.Parallel()
	for name, atStart := range map[string]bool{"at start": true, "added later": false} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			first := 141
			if !atStart {
				first = 151
			}
			bs := backends(t, first, "good", "other")
			files := manifests{
				"class.yaml":    ingressClass,
				"services.yaml": docs(service("shop", "good", bs["good"]), service("shop", "other", bs["other"])),
				"good.yaml":     hostIngress("good", "web.test", "good"),
			}
			if atStart {
				files["broken.yaml"] = brokenIngresses
			}
			c := start(t, nil, files)
			hc := c.Client(harness.ClientOptions{})
			expectRoute(t, hc, "http://web.test/", "good")
			if !atStart {
				workers := c.WorkerPIDs()
				c.WriteManifest("broken.yaml", brokenIngresses)
				waitBackend(t, hc, "http://broken.test/ok", "other", changeTimeout)
				waitReloaded(t, c, workers)
			}

			for _, p := range []struct{ ingress, field string }{
				{"bad-path", "spec.rules[0].http.paths[0].path"},
				{"missing-service", "spec.rules[0].http.paths[0].backend.service.name"},
				{"bad-tls", "spec.tls[0].secretName"},
			} {
				line := c.WaitLog(0, 2*time.Second, "kind=Ingress", "namespace=shop", "name="+p.ingress+" ", "field="+p.field+" ")
				if line == "" {
					t.Errorf("no log line names Ingress shop/%s and field %s; log:\n%s", p.ingress, p.field, c.Log())
				} else {
					t.Logf("%s", line)
				}
			}

			expectRoute(t, hc, "http://web.test/", "good")
			expectRoute(t, hc, "http://web.test/any/path", "good")
			expectRoute(t, hc, "http://broken.test/ok/x", "other")
			expectRoute(t, hc, "http://broken.test/fine", "other")
			expectRoute(t, hc, "http://broken.test/missing", "")
			expectRoute(t, hc, "http://broken.test/a;b", "")
			// The host of the bad Secret is served over plain HTTP only.
			expectRoute(t, hc, "http://badtls.test/", "other")
			conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", c.HTTPSAddr,
				&tls.Config{ServerName: "badtls.test", InsecureSkipVerify: true})
			if err == nil {
				conn.Close()
				t.Errorf("a TLS handshake for badtls.test succeeded, with a certificate for %v", conn.ConnectionState().PeerCertificates[0].DNSNames)
			}
		})
	}
}

// TestYAMLSyntaxError breaks a manifest file: the objects it defined keep
// serving, nothing reloads, the log names the file; once fixed, its new
// content is served.
func TestYAMLSyntaxError(t *testing.T) {
	t.Parallel()
	bs := backends(t, 161, "web", "one", "two")
	c := start(t, nil, manifests{
		"class.yaml":    ingressClass,
		"ingress.yaml":  webIngress("one"),
		"services.yaml": docs(service("shop", "web", bs["web"]), service("shop", "one", bs["one"]), service("shop", "two", bs["two"])),
	})
	hc := c.Client(harness.ClientOptions{})
	expectRoute(t, hc, "http://web.test/one", "one")
	expectRoute(t, hc, "http://web.test/two", "web")
	// Let the reload interval after the start pass, so that a reload
	// would show at once.
	time.Sleep(time.Second)
	before := snapshot(t, c)

	// The Ingress with a path added, and a flow sequence never closed.
	broken := webIngress("one", "two") + "  tls: [{hosts: [web.test], secretName: x}\n"
	c.WriteManifest("ingress.yaml", broken)
	line := c.WaitLog(before.logOff, changeTimeout, "level=WARN", "ingress.yaml")
	if line == "" {
		t.Fatalf("no warning names ingress.yaml within %v; log since the edit:\n%s", changeTimeout, c.LogSince(before.logOff))
	}
	t.Logf("%s", line)
	// A pass that would act on the file has had its time.
	time.Sleep(300 * time.Millisecond)
	expectRoute(t, hc, "http://web.test/one", "one")
	expectRoute(t, hc, "http://web.test/two", "web")
	expectRoute(t, hc, "http://web.test/", "web")
	expectNoReload(t, c, before)

	c.WriteManifest("ingress.yaml", webIngress("one", "two"))
	took := waitBackend(t, hc, "http://web.test/two", "two", changeTimeout)
	t.Logf("fixed file served %v after it was written", took.Round(time.Millisecond))
	expectRoute(t, hc, "http://web.test/one", "one")
}
