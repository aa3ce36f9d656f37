package model

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"sync"

	core_v1 "k8s.io/api/core/v1"
	networking_v1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// attachTLS gives each server the certificate of the oldest Ingress whose
// spec.tls lists its host with a usable Secret. The Ingress need not have a
// rule for the host: a server some Ingress made is enough. A missing or
// invalid Secret is a problem and secures nothing, so a host whose Secrets
// are all bad is served over plain HTTP only: a certificate can never break
// nginx -t for everyone, because only pairs that crypto/tls accepts get here.
//
// A wildcard TLS host serves the wildcard server of the same name, not the
// names it covers.
func (b *builder) attachTLS() {
	for _, ing := range b.ingresses {
		from := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
		for k := range ing.Spec.TLS {
			t := &ing.Spec.TLS[k]
			if len(t.Hosts) == 0 {
				b.ingressProblem(ing, fmt.Sprintf("spec.tls[%d].hosts", k),
					"the TLS entry lists no hosts, and zonal has no default certificate to use it with: list the hosts it is for")
				continue
			}
			var (
				cert    *TLS
				checked bool
			)
			for m, host := range t.Hosts {
				if reason := hostError(host); reason != "" {
					b.ingressProblem(ing, fmt.Sprintf("spec.tls[%d].hosts[%d]", k, m),
						"host %q %s; it gets no certificate from this entry: fix the host", host, reason)
					continue
				}
				srv := b.servers[host]
				if srv == nil {
					b.ingressProblem(ing, fmt.Sprintf("spec.tls[%d].hosts[%d]", k, m),
						"no Ingress rule serves host %q, so its certificate is not used: add a rule for the host or fix the name", host)
					continue
				}
				if !checked {
					checked = true
					cert = b.certificate(ing, k, t.SecretName)
				}
				switch {
				case cert == nil:
				case srv.tls == nil:
					srv.tls, srv.tlsFrom = cert, from
				case srv.tls.Secret != cert.Secret:
					by := "an earlier TLS entry of this Ingress"
					if srv.tlsFrom != from {
						by = "Ingress " + srv.tlsFrom.String() + ", which is older"
					}
					b.ingressProblem(ing, fmt.Sprintf("spec.tls[%d].hosts[%d]", k, m),
						"host %q already has the certificate of Secret %s from %s; Secret %s is not used for it: remove the host from one of the two",
						host, srv.tls.Secret, by, cert.Secret)
				}
			}
		}
	}
}

// certificate is the validated pair of the Secret spec.tls[k] of ing names,
// nil with a problem if there is none.
func (b *builder) certificate(ing *networking_v1.Ingress, k int, secretName string) *TLS {
	if secretName == "" {
		b.ingressProblem(ing, fmt.Sprintf("spec.tls[%d].secretName", k),
			"the TLS entry names no Secret, and zonal has no default certificate, so the entry secures none of its hosts (%s): name a Secret of type kubernetes.io/tls",
			strings.Join(ing.Spec.TLS[k].Hosts, ", "))
		return nil
	}
	key := types.NamespacedName{Namespace: ing.Namespace, Name: secretName}
	cert, reason := b.certs.lookup(key, b.s.Secrets[key])
	if reason != "" {
		b.ingressProblem(ing, fmt.Sprintf("spec.tls[%d].secretName", k),
			"Secret %s %s, so the entry secures none of its hosts (%s): fix the Secret or secretName",
			key, reason, strings.Join(ing.Spec.TLS[k].Hosts, ", "))
	}
	return cert
}

// CertCache remembers which TLS Secrets hold a valid certificate and key, so
// that a rebuild does not parse every pair again (an RSA-2048 pair costs
// about 0.2 ms: a thousand of them would take the whole rebuild budget).
//
// Entries are keyed by the Secret object itself: the store replaces an
// object when it changes and never edits one in place, so the same pointer
// means the same content, and the cache never changes what Build returns.
// Safe for concurrent use; the zero value is ready.
type CertCache struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]certEntry
}

type certEntry struct {
	secret *core_v1.Secret
	tls    *TLS
	reason string
}

// lookup validates secret, or returns the earlier verdict on the same object.
func (c *CertCache) lookup(key types.NamespacedName, secret *core_v1.Secret) (*TLS, string) {
	if secret == nil {
		return nil, "does not exist"
	}
	c.mu.Lock()
	e, ok := c.entries[key]
	c.mu.Unlock()
	if ok && e.secret == secret {
		return e.tls, e.reason
	}
	e = certEntry{secret: secret}
	e.tls, e.reason = validateSecret(key, secret)
	c.mu.Lock()
	if c.entries == nil {
		c.entries = map[types.NamespacedName]certEntry{}
	}
	c.entries[key] = e
	c.mu.Unlock()
	return e.tls, e.reason
}

// forget drops the entries of Secrets that are gone from, or were replaced
// in, secrets, so that the cache holds no more than the cluster does.
func (c *CertCache) forget(secrets map[types.NamespacedName]*core_v1.Secret) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for key, e := range c.entries {
		if secrets[key] != e.secret {
			delete(c.entries, key)
		}
	}
}

// validateSecret checks that secret holds a certificate chain and its key:
// type kubernetes.io/tls, or Opaque with the same keys; a key that matches
// the first certificate; and every certificate of the chain parsable, since
// NGINX refuses the whole configuration over one bad certificate.
func validateSecret(key types.NamespacedName, secret *core_v1.Secret) (*TLS, string) {
	switch secret.Type {
	case core_v1.SecretTypeTLS, core_v1.SecretTypeOpaque, "":
	default:
		return nil, fmt.Sprintf("has type %s, not kubernetes.io/tls", secret.Type)
	}
	certPEM, keyPEM := secret.Data[core_v1.TLSCertKey], secret.Data[core_v1.TLSPrivateKeyKey]
	if len(certPEM) == 0 || len(keyPEM) == 0 {
		return nil, "has no tls.crt or no tls.key"
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Sprintf("holds no valid certificate and key (%v)", err)
	}
	chain := pair.Certificate
	if pair.Leaf != nil {
		chain = chain[1:] // X509KeyPair parsed the first one
	}
	for i, der := range chain {
		if _, err := x509.ParseCertificate(der); err != nil {
			return nil, fmt.Sprintf("has an unparsable certificate at position %d of tls.crt (%v)", len(pair.Certificate)-len(chain)+i+1, err)
		}
	}
	return &TLS{Secret: key, Cert: certPEM, Key: keyPEM}, ""
}

// sslRedirect reads an Ingress's zonal.dev/ssl-redirect annotation; an
// invalid value is a problem and counts as unset.
func (b *builder) sslRedirect(ing *networking_v1.Ingress) (value, set bool) {
	v, ok := ing.Annotations[AnnotationSSLRedirect]
	if !ok {
		return false, false
	}
	switch v {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	b.ingressProblem(ing, "metadata.annotations["+AnnotationSSLRedirect+"]",
		"%s is %q, not \"true\" or \"false\"; the global setting applies: fix the value", AnnotationSSLRedirect, v)
	return false, false
}

// applyRedirect records ing's redirect setting on srv unless an older
// Ingress of the host set it already: a server-level setting, the oldest
// wins.
func (b *builder) applyRedirect(srv *server, ing *networking_v1.Ingress, value bool) {
	from := types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}
	switch {
	case !srv.redirectSet:
		srv.redirectSet, srv.redirect, srv.redirectFrom = true, value, from
	case srv.redirect != value:
		b.ingressProblem(ing, "metadata.annotations["+AnnotationSSLRedirect+"]",
			"%s is %t, but older Ingress %s sets %t for %s, and the oldest wins; this value is ignored there: make the two agree",
			AnnotationSSLRedirect, value, srv.redirectFrom, srv.redirect, hostPhrase(srv.host))
	}
}
