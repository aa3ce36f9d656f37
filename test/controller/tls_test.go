package controller

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/test/harness"
)

// TestTLS serves two hosts with their own certificates from
// kubernetes.io/tls Secrets, chosen by SNI, and a third host whose Ingress
// asks for the redirect to HTTPS.
func TestTLS(t *testing.T) {
	t.Parallel()
	hosts := []string{"a.tls.test", "b.tls.test", "r.tls.test"}
	bs := backends(t, 101, "a", "b", "r")
	certs := map[string]*x509.Certificate{}
	var secrets []string
	for i, host := range hosts {
		certPEM, keyPEM, cert := selfSigned(t, host)
		certs[host] = cert
		secrets = append(secrets, tlsSecret("shop", fmt.Sprintf("%c-tls", 'a'+i), certPEM, keyPEM))
	}
	const ingresses = `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: secure
  namespace: shop
spec:
  ingressClassName: zonal
  tls:
  - hosts: [a.tls.test]
    secretName: a-tls
  - hosts: [b.tls.test]
    secretName: b-tls
  rules:
  - host: a.tls.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: a, port: {number: 80}}}}
  - host: b.tls.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: b, port: {number: 80}}}}
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: redirected
  namespace: shop
  annotations:
    zonal.dev/ssl-redirect: "true"
spec:
  ingressClassName: zonal
  tls:
  - hosts: [r.tls.test]
    secretName: c-tls
  rules:
  - host: r.tls.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: r, port: {number: 80}}}}
`
	c := start(t, nil, manifests{
		"class.yaml":    ingressClass,
		"services.yaml": docs(service("shop", "a", bs["a"]), service("shop", "b", bs["b"]), service("shop", "r", bs["r"])),
		"secrets.yaml":  docs(secrets...),
		"ingress.yaml":  ingresses,
	})

	// Each host's certificate is its own trust root: the handshake
	// succeeds only if NGINX presents exactly that certificate for that
	// server name.
	for _, host := range hosts {
		t.Run("SNI "+host, func(t *testing.T) {
			roots := x509.NewCertPool()
			roots.AddCert(certs[host])
			hc := c.Client(harness.ClientOptions{TLS: &tls.Config{RootCAs: roots}})
			r := get(t, hc, "https://"+host+"/x?y=1")
			if want := host[:1]; r.Status != http.StatusOK || r.Backend() != want {
				t.Fatalf("https://%s/: %s, want 200 from %s", host, describe(r), want)
			}
			if got := r.TLS.PeerCertificates[0].DNSNames; !slices.Equal(got, []string{host}) {
				t.Errorf("certificate for %v, want %s", got, host)
			}
			if r.TLS.ServerName != host {
				t.Errorf("SNI %q, want %q", r.TLS.ServerName, host)
			}
			e, err := r.Echo()
			if err != nil {
				t.Fatal(err)
			}
			if e.Header.Get("X-Forwarded-Proto") != "https" || e.Host != host {
				t.Errorf("backend saw Host %q, X-Forwarded-Proto %q; want %q, https", e.Host, e.Header.Get("X-Forwarded-Proto"), host)
			}
		})
	}

	t.Run("another host's certificate is refused", func(t *testing.T) {
		roots := x509.NewCertPool()
		roots.AddCert(certs["a.tls.test"])
		hc := c.Client(harness.ClientOptions{TLS: &tls.Config{RootCAs: roots}})
		if r, err := harness.Get(hc, "https://b.tls.test/"); err == nil {
			t.Errorf("b.tls.test verified with a.tls.test's certificate as the only root: %s", describe(r))
		}
	})

	t.Run("plain HTTP still served for TLS hosts", func(t *testing.T) {
		hc := c.Client(harness.ClientOptions{})
		expectRoute(t, hc, "http://a.tls.test/plain", "a")
		expectRoute(t, hc, "http://b.tls.test/plain", "b")
	})

	t.Run("ssl-redirect", func(t *testing.T) {
		hc := c.Client(harness.ClientOptions{})
		r := get(t, hc, "http://r.tls.test/path/x?q=1&r=2")
		if r.Status != http.StatusPermanentRedirect || r.Backend() != "" {
			t.Fatalf("plain HTTP to r.tls.test: %s, want 308 from NGINX", describe(r))
		}
		checkRedirect(t, c, r, "r.tls.test", "/path/x?q=1&r=2")
		expectRoute(t, c.Client(harness.ClientOptions{}), "https://r.tls.test/path/x", "r")
	})

	// Renewing a certificate is editing its Secret: the new one is served,
	// and the old file is removed from the runtime directory.
	t.Run("certificate renewed", func(t *testing.T) {
		certPEM, keyPEM, renewed := selfSigned(t, "a.tls.test")
		secrets[0] = tlsSecret("shop", "a-tls", certPEM, keyPEM)
		c.WriteManifest("secrets.yaml", docs(secrets...))
		roots := x509.NewCertPool()
		roots.AddCert(renewed)
		hc := c.Client(harness.ClientOptions{TLS: &tls.Config{RootCAs: roots}})
		var last error
		err := harness.WaitUntil(changeTimeout, 20*time.Millisecond, func() error {
			r, err := harness.Get(hc, "https://a.tls.test/")
			if err == nil && r.Backend() != "a" {
				err = fmt.Errorf("%s", describe(r))
			}
			last = err
			return err
		})
		if err != nil {
			t.Fatalf("the renewed certificate is not served within %v: %v", changeTimeout, last)
		}
		// The old file goes once the reload is complete (the old workers
		// gone), a moment after the new workers serve.
		var files []string
		err = harness.WaitUntil(changeTimeout, 20*time.Millisecond, func() error {
			var err error
			if files, err = filepath.Glob(filepath.Join(c.RuntimeDir, "certs", "*")); err != nil {
				return harness.StopWaiting(err)
			}
			if len(files) != len(hosts) {
				return fmt.Errorf("certificate files %v, want one per Secret (%d)", files, len(hosts))
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})

	t.Run("unknown server name refused", func(t *testing.T) {
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", c.HTTPSAddr,
			&tls.Config{ServerName: "unknown.tls.test", InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
			t.Errorf("a TLS handshake for unknown.tls.test succeeded with certificate %v", conn.ConnectionState().PeerCertificates[0].DNSNames)
		}
	})
}

// TestSSLRedirectFlag: with --ssl-redirect every TLS host redirects plain
// HTTP, unless its Ingress says zonal.dev/ssl-redirect: "false"; a host
// without TLS is never redirected.
func TestSSLRedirectFlag(t *testing.T) {
	t.Parallel()
	bs := backends(t, 201, "always", "never", "plain")
	alwaysCert, alwaysKey, _ := selfSigned(t, "always.tls.test")
	neverCert, neverKey, _ := selfSigned(t, "never.tls.test")
	ingress := func(name, annotation string) string {
		meta := ""
		if annotation != "" {
			meta = "\n  annotations:\n    zonal.dev/ssl-redirect: \"" + annotation + "\""
		}
		return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %[1]s
  namespace: shop%[2]s
spec:
  ingressClassName: zonal
  tls:
  - hosts: [%[1]s.tls.test]
    secretName: %[1]s-tls
  rules:
  - host: %[1]s.tls.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: %[1]s, port: {number: 80}}}}
`, name, meta)
	}
	c := start(t, []string{"--ssl-redirect"}, manifests{
		"class.yaml":    ingressClass,
		"services.yaml": docs(service("shop", "always", bs["always"]), service("shop", "never", bs["never"]), service("shop", "plain", bs["plain"])),
		"secrets.yaml":  docs(tlsSecret("shop", "always-tls", alwaysCert, alwaysKey), tlsSecret("shop", "never-tls", neverCert, neverKey)),
		"ingress.yaml":  docs(ingress("always", ""), ingress("never", "false"), hostIngress("plain", "plain.test", "plain")),
	})
	hc := c.Client(harness.ClientOptions{})
	r := get(t, hc, "http://always.tls.test/a?b=c")
	if r.Status != http.StatusPermanentRedirect {
		t.Errorf("plain HTTP to always.tls.test: %s, want 308", describe(r))
	}
	checkRedirect(t, c, r, "always.tls.test", "/a?b=c")
	expectRoute(t, hc, "https://always.tls.test/a", "always")
	expectRoute(t, hc, "http://never.tls.test/a", "never")
	expectRoute(t, hc, "https://never.tls.test/a", "never")
	expectRoute(t, hc, "http://plain.test/a", "plain")
}

// checkRedirect checks that r's Location is https://host:PORT<requestURI>
// with the controller's HTTPS port (never 443 in these tests).
func checkRedirect(t *testing.T, c *harness.Controller, r harness.Reply, host, requestURI string) {
	t.Helper()
	loc, err := url.Parse(r.Header.Get("Location"))
	if err != nil {
		t.Fatalf("Location %q: %v", r.Header.Get("Location"), err)
	}
	if loc.Scheme != "https" || loc.Hostname() != host || loc.RequestURI() != requestURI ||
		loc.Port() != strconv.Itoa(c.HTTPSPort) {
		t.Errorf("Location %q, want https://%s:%d%s", loc, host, c.HTTPSPort, requestURI)
	}
}
