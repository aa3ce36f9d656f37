package model

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// tlsIngress is an Ingress with rules for ruleHosts (each routing / to web)
// and one TLS entry for tlsHosts with secretName (none if both are empty),
// created at created, with an optional annotation line.
func tlsIngress(name, created, annotation, secretName string, tlsHosts, ruleHosts []string) string {
	var sb strings.Builder
	sb.WriteString(`
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: ` + name + `
  creationTimestamp: "` + created + `"`)
	if annotation != "" {
		sb.WriteString("\n  annotations:\n    " + annotation)
	}
	sb.WriteString(`
spec:
  ingressClassName: zonal`)
	if secretName != "" || tlsHosts != nil {
		sb.WriteString(`
  tls:
  - secretName: "` + secretName + `"
    hosts:`)
		if len(tlsHosts) == 0 {
			sb.WriteString(" []")
		}
		for _, h := range tlsHosts {
			sb.WriteString("\n    - \"" + h + "\"")
		}
	}
	sb.WriteString("\n  rules:")
	for _, h := range ruleHosts {
		sb.WriteString(`
  - host: "` + h + `"
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              number: 80`)
	}
	return sb.String() + "\n"
}

// hosts is a shorthand for a list of host names.
func hosts(h ...string) []string { return h }

const webBackend = `
	backend default-web-80 default/web:80
	  10.0.1.1:8080 zone=zone-a node=node-a ready
`

func TestTLS(t *testing.T) {
	redirectAll := testOptions
	redirectAll.SSLRedirect = true
	tlsFiles := []string{"base.yaml", "tls.yaml"}
	const t0, t1 = "2025-01-01T00:00:00Z", "2025-02-01T00:00:00Z"
	shop := hosts("shop.example.com")

	runCases(t, map[string]buildCase{
		"a kubernetes.io/tls Secret": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "example-tls", shop, shop),
			want: `
				server shop.example.com tls=default/example-tls
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend,
		},
		"an Opaque Secret with tls.crt and tls.key": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "opaque-tls", shop, shop),
			want: `
				server shop.example.com tls=default/opaque-tls
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend,
		},
		"a missing Secret: plain HTTP and a problem": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "nope-tls", shop, shop),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].secretName
			`,
			says: []string{"Secret default/nope-tls does not exist, so the entry secures none of its hosts (shop.example.com)"},
		},
		"a key that does not match the certificate": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "mismatched-tls", shop, shop),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].secretName
			`,
			says: []string{"Secret default/mismatched-tls holds no valid certificate and key (tls: private key does not match public key)"},
		},
		"a Secret that is not PEM": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "garbage-tls", shop, shop),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].secretName
			`,
			says: []string{"Secret default/garbage-tls holds no valid certificate and key"},
		},
		"a chain with an unparsable certificate": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "bad-chain-tls", shop, shop),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].secretName
			`,
			says: []string{"Secret default/bad-chain-tls has an unparsable certificate at position 2 of tls.crt"},
		},
		"a Secret of another type": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "basic-auth", shop, shop),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].secretName
			`,
			says: []string{"Secret default/basic-auth has type kubernetes.io/basic-auth, not kubernetes.io/tls"},
		},
		"an Opaque Secret without tls.key": {
			files: tlsFiles,
			objs: `
				apiVersion: v1
				kind: Secret
				metadata:
				  name: half-tls
				type: Opaque
				stringData:
				  tls.crt: "only a certificate"
				---` + tlsIngress("shop", t0, "", "half-tls", shop, shop),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].secretName
			`,
			says: []string{"Secret default/half-tls has no tls.crt or no tls.key"},
		},
		"no secretName": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "", shop, shop),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].secretName
			`,
			says: []string{"the TLS entry names no Secret"},
		},
		"no hosts": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "example-tls", nil, shop),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].hosts
			`,
			says: []string{"the TLS entry lists no hosts"},
		},
		"a bad TLS host": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "example-tls", hosts("Shop.example.com", "shop.example.com"), shop),
			want: `
				server shop.example.com tls=default/example-tls
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].hosts[0]
			`,
			says: []string{`host "Shop.example.com" has uppercase letters`},
		},
		"a TLS host served by another Ingress's rule gets the certificate": {
			files: tlsFiles,
			objs: tlsIngress("certs", t0, "", "example-tls", shop, nil) + "---" +
				tlsIngress("routes", t1, "", "", nil, shop),
			want: `
				server shop.example.com tls=default/example-tls
				   / -> default-web-80 (default/routes Prefix)
			` + webBackend,
		},
		"a TLS host no rule serves: a problem": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "example-tls", hosts("typo.example.com", "shop.example.com"), shop),
			want: `
				server shop.example.com tls=default/example-tls
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].hosts[0]
			`,
			says: []string{`no Ingress rule serves host "typo.example.com"`},
		},
		"a wildcard TLS host serves the wildcard server, not the names it covers": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "example-tls", hosts("*.example.com"), hosts("*.example.com", "shop.example.com")),
			want: `
				server *.example.com tls=default/example-tls
				   / -> default-web-80 (default/shop Prefix)
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend,
		},
		"the oldest Ingress wins a host's TLS": {
			files: tlsFiles,
			objs: tlsIngress("new", t1, "", "second-tls", shop, shop) + "---" +
				tlsIngress("old", t0, "", "example-tls", shop, shop),
			want: `
				server shop.example.com tls=default/example-tls
				   / -> default-web-80 (default/old Prefix)
			` + webBackend + `
				problem Ingress default/new spec.tls[0].hosts[0]
			`,
			says: []string{"host \"shop.example.com\" already has the certificate of Secret default/example-tls from Ingress default/old, which is older"},
		},
		"the oldest Ingress's Secret is broken: the next one's is used": {
			files: tlsFiles,
			objs: tlsIngress("new", t1, "", "second-tls", shop, shop) + "---" +
				tlsIngress("old", t0, "", "garbage-tls", shop, shop),
			want: `
				server shop.example.com tls=default/second-tls
				   / -> default-web-80 (default/old Prefix)
			` + webBackend + `
				problem Ingress default/old spec.tls[0].secretName
			`,
		},
		"--ssl-redirect redirects TLS hosts only": {
			opts:  &redirectAll,
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, "", "example-tls", shop, hosts("shop.example.com", "plain.example.com")),
			want: `
				server plain.example.com
				   / -> default-web-80 (default/shop Prefix)
				server shop.example.com tls=default/example-tls redirect
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend,
		},
		"ssl-redirect false overrides --ssl-redirect": {
			opts:  &redirectAll,
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, `zonal.dev/ssl-redirect: "false"`, "example-tls", shop, shop),
			want: `
				server shop.example.com tls=default/example-tls
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend,
		},
		"ssl-redirect true without --ssl-redirect": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, `zonal.dev/ssl-redirect: "true"`, "example-tls", shop, shop),
			want: `
				server shop.example.com tls=default/example-tls redirect
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend,
		},
		"ssl-redirect true without TLS does nothing": {
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, `zonal.dev/ssl-redirect: "true"`, "nope-tls", shop, shop),
			want: `
				server shop.example.com
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop spec.tls[0].secretName
			`,
		},
		"an invalid ssl-redirect is a problem and counts as unset": {
			opts:  &redirectAll,
			files: tlsFiles,
			objs:  tlsIngress("shop", t0, `zonal.dev/ssl-redirect: "no"`, "example-tls", shop, shop),
			want: `
				server shop.example.com tls=default/example-tls redirect
				   / -> default-web-80 (default/shop Prefix)
			` + webBackend + `
				problem Ingress default/shop metadata.annotations[zonal.dev/ssl-redirect]
			`,
			says: []string{`zonal.dev/ssl-redirect is "no", not "true" or "false"`},
		},
		"the oldest Ingress of a host wins ssl-redirect": {
			files: tlsFiles,
			objs: tlsIngress("new", t1, `zonal.dev/ssl-redirect: "false"`, "example-tls", shop, shop) + "---" +
				tlsIngress("old", t0, `zonal.dev/ssl-redirect: "true"`, "example-tls", shop, shop),
			want: `
				server shop.example.com tls=default/example-tls redirect
				   / -> default-web-80 (default/old Prefix)
			` + webBackend + `
				problem Ingress default/new metadata.annotations[zonal.dev/ssl-redirect]
			`,
			says: []string{"zonal.dev/ssl-redirect is false, but older Ingress default/old sets true for host shop.example.com"},
		},
		"a newer Ingress's ssl-redirect applies when the older ones say nothing": {
			opts:  &redirectAll,
			files: tlsFiles,
			objs: tlsIngress("new", t1, `zonal.dev/ssl-redirect: "false"`, "example-tls", shop, shop) + "---" +
				tlsIngress("old", t0, "", "example-tls", shop, shop),
			want: `
				server shop.example.com tls=default/example-tls
				   / -> default-web-80 (default/old Prefix)
			` + webBackend,
		},
	})
}

// TestCertCache checks that a cache changes nothing but the work: the same
// Secret object is validated once, a replaced one again, and a deleted one
// is forgotten.
func TestCertCache(t *testing.T) {
	s := snapshot(t, []string{"base.yaml", "tls.yaml"},
		tlsIngress("shop", "2025-01-01T00:00:00Z", "", "example-tls", hosts("shop.example.com"), hosts("shop.example.com")))
	o := testOptions
	o.Certificates = &CertCache{}

	first := Build(s, o)
	second := Build(s, o)
	if first.Servers[0].TLS == nil || first.Servers[0].TLS != second.Servers[0].TLS {
		t.Fatalf("the same Secret object was validated twice: %p, %p", first.Servers[0].TLS, second.Servers[0].TLS)
	}

	key := types.NamespacedName{Namespace: "default", Name: "example-tls"}
	broken := s.Secrets[key].DeepCopy()
	broken.Data["tls.key"] = []byte("not a key")
	s.Secrets[key] = broken
	if m := Build(s, o); m.Servers[0].TLS != nil || len(m.Problems) != 1 {
		t.Fatalf("a replaced Secret kept its old verdict: TLS %v, problems:\n%s", m.Servers[0].TLS, messages(m))
	}

	delete(s.Secrets, key)
	Build(s, o)
	if _, ok := o.Certificates.entries[key]; ok {
		t.Errorf("a deleted Secret is still cached")
	}
}
