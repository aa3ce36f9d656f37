package model

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/netip"
	"strconv"
	"sync"
	"testing"
	"time"

	core_v1 "k8s.io/api/core/v1"
	discovery_v1 "k8s.io/api/discovery/v1"
	networking_v1 "k8s.io/api/networking/v1"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/zonal-ingress/zonal/controller/store"
)

// BenchmarkBuild rebuilds the model of a large cluster: 5,000 Ingresses
// (two paths each, two Ingresses per host), 10,000 Services, 100,000
// endpoints over 300 Nodes in 3 zones. The target is 200 ms per build.
//
//   - plain: no TLS.
//   - tls-cached: every Ingress has its own RSA-2048 Secret, and the
//     controller's CertCache has seen them (the steady state).
//   - tls-cold: the same, validating all 5,000 pairs again (the first
//     build after a start, or a Build without a cache).
func BenchmarkBuild(b *testing.B) {
	plain := generate(5000, 10000, 10, false)
	withTLS := generate(5000, 10000, 10, true)

	b.Run("plain", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Build(plain, generatedOptions)
		}
	})
	b.Run("tls-cached", func(b *testing.B) {
		o := generatedOptions
		o.Certificates = &CertCache{}
		Build(withTLS, o)
		b.ReportAllocs()
		for b.Loop() {
			Build(withTLS, o)
		}
	})
	b.Run("tls-cold", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			Build(withTLS, generatedOptions)
		}
	})
}

var generatedOptions = Options{
	IngressClass:          "zonal",
	ControllerClass:       "zonal.dev/ingress-controller",
	DefaultBackendService: types.NamespacedName{Namespace: "ns-0", Name: "svc-0"},
	SSLRedirect:           true,
}

// generate builds a cluster in code: nIngress Ingresses over 100
// namespaces, two per host, each with a Prefix path to one Service (by port
// number) and an Exact path to the next (by port name); nService Services,
// each with perService endpoints in one EndpointSlice (every tenth Service
// in two); 300 Nodes in 3 zones. A third of the endpoints name their zone,
// the rest only their Node; every twentieth is terminating. With tls,
// every Ingress has its own Secret, all holding the same RSA-2048 pair.
func generate(nIngress, nService, perService int, tls bool) *store.Snapshot {
	s := store.NewSnapshot()
	zones := []string{"zone-a", "zone-b", "zone-c"}
	ns := func(i int) string { return "ns-" + strconv.Itoa(i%100) }

	s.IngressClasses["zonal"] = &networking_v1.IngressClass{
		ObjectMeta: meta_v1.ObjectMeta{Name: "zonal"},
		Spec:       networking_v1.IngressClassSpec{Controller: "zonal.dev/ingress-controller"},
	}
	for i := 0; i < 300; i++ {
		name := "node-" + strconv.Itoa(i)
		s.Nodes[name] = &core_v1.Node{ObjectMeta: meta_v1.ObjectMeta{
			Name:   name,
			Labels: map[string]string{core_v1.LabelTopologyZone: zones[i%3]},
		}}
	}

	addr := netip.MustParseAddr("10.0.0.1")
	for j := 0; j < nService; j++ {
		key := types.NamespacedName{Namespace: ns(j / 2), Name: "svc-" + strconv.Itoa(j)}
		s.Services[key] = &core_v1.Service{
			ObjectMeta: meta_v1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Spec: core_v1.ServiceSpec{Ports: []core_v1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
				{Name: "metrics", Port: 9100, TargetPort: intstr.FromInt32(9100)},
			}},
		}
		nSlices := 1
		if j%10 == 0 {
			nSlices = 2
		}
		slices := map[string]*discovery_v1.EndpointSlice{}
		for k := 0; k < nSlices; k++ {
			slice := &discovery_v1.EndpointSlice{
				ObjectMeta: meta_v1.ObjectMeta{
					Namespace: key.Namespace,
					Name:      key.Name + "-" + strconv.Itoa(k),
					Labels:    map[string]string{discovery_v1.LabelServiceName: key.Name},
				},
				AddressType: discovery_v1.AddressTypeIPv4,
				Ports: []discovery_v1.EndpointPort{
					{Name: ptr("metrics"), Port: ptr(int32(9100))},
					{Name: ptr("http"), Port: ptr(int32(8080))},
				},
			}
			for e := k; e < perService; e += nSlices {
				n := j*perService + e
				ep := discovery_v1.Endpoint{
					Addresses: []string{addr.String()},
					NodeName:  ptr("node-" + strconv.Itoa(n%300)),
				}
				addr = addr.Next()
				if n%3 == 0 {
					ep.Zone = ptr(zones[n%300%3])
					ep.Hints = &discovery_v1.EndpointHints{ForZones: []discovery_v1.ForZone{{Name: zones[n%300%3]}}}
				}
				if n%20 == 0 {
					ep.Conditions = discovery_v1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
				}
				slice.Endpoints = append(slice.Endpoints, ep)
			}
			slices[slice.Name] = slice
		}
		s.EndpointSlices[key] = slices
	}

	prefix := networking_v1.PathTypePrefix
	exact := networking_v1.PathTypeExact
	class := "zonal"
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	var certPEM, keyPEM []byte
	if tls {
		certPEM, keyPEM = rsaPair()
	}
	for i := 0; i < nIngress; i++ {
		name := "ing-" + strconv.Itoa(i)
		host := "app-" + strconv.Itoa(i/2) + ".example.com"
		svc := func(j int) networking_v1.IngressBackend {
			return networking_v1.IngressBackend{Service: &networking_v1.IngressServiceBackend{
				Name: "svc-" + strconv.Itoa(j),
			}}
		}
		byNumber, byName := svc(2*i), svc(2*i+1)
		byNumber.Service.Port.Number = 80
		byName.Service.Port.Name = "http"
		ing := &networking_v1.Ingress{
			ObjectMeta: meta_v1.ObjectMeta{
				Namespace:         ns(i),
				Name:              name,
				CreationTimestamp: meta_v1.NewTime(base.Add(time.Duration(i%1000) * time.Second)),
			},
			Spec: networking_v1.IngressSpec{
				IngressClassName: &class,
				Rules: []networking_v1.IngressRule{{
					Host: host,
					IngressRuleValue: networking_v1.IngressRuleValue{HTTP: &networking_v1.HTTPIngressRuleValue{
						Paths: []networking_v1.HTTPIngressPath{
							{Path: "/" + name, PathType: &prefix, Backend: byNumber},
							{Path: "/" + name + "/api/v1", PathType: &exact, Backend: byName},
						},
					}},
				}},
			},
		}
		if tls {
			secret := &core_v1.Secret{
				ObjectMeta: meta_v1.ObjectMeta{Namespace: ns(i), Name: name + "-tls"},
				Type:       core_v1.SecretTypeTLS,
				Data:       map[string][]byte{core_v1.TLSCertKey: certPEM, core_v1.TLSPrivateKeyKey: keyPEM},
			}
			s.Secrets[types.NamespacedName{Namespace: secret.Namespace, Name: secret.Name}] = secret
			ing.Spec.TLS = []networking_v1.IngressTLS{{Hosts: []string{host}, SecretName: secret.Name}}
		}
		s.Ingresses[types.NamespacedName{Namespace: ing.Namespace, Name: ing.Name}] = ing
	}
	return s
}

func ptr[T any](v T) *T { return &v }

var rsaPair = sync.OnceValues(func() ([]byte, []byte) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(1),
		Subject:      pkix.Name{CommonName: "*.example.com"},
		DNSNames:     []string{"*.example.com"},
		NotBefore:    time.Now(),
		NotAfter:     time.Now().Add(24 * time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
})
