package store

import (
	"sync"
	"testing"
	"time"

	core_v1 "k8s.io/api/core/v1"
	discovery_v1 "k8s.io/api/discovery/v1"
	networking_v1 "k8s.io/api/networking/v1"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Small fixture builders: each returns an object with a resourceVersion,
// as an API server would send it.

func meta(ns, name, rv string) meta_v1.ObjectMeta {
	return meta_v1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}
}

func ingressClass(name, rv string) *networking_v1.IngressClass {
	return &networking_v1.IngressClass{
		ObjectMeta: meta("", name, rv),
		Spec:       networking_v1.IngressClassSpec{Controller: "zonal.dev/ingress-controller"},
	}
}

func ingress(ns, name, rv, host string) *networking_v1.Ingress {
	return &networking_v1.Ingress{
		ObjectMeta: meta(ns, name, rv),
		Spec: networking_v1.IngressSpec{
			IngressClassName: ptr.To("zonal"),
			Rules:            []networking_v1.IngressRule{{Host: host}},
		},
	}
}

func service(ns, name, rv string) *core_v1.Service {
	return &core_v1.Service{
		ObjectMeta: meta(ns, name, rv),
		Spec:       core_v1.ServiceSpec{Ports: []core_v1.ServicePort{{Name: "http", Port: 80}}},
	}
}

func slice(ns, name, rv, svc string, addrs ...string) *discovery_v1.EndpointSlice {
	s := &discovery_v1.EndpointSlice{
		ObjectMeta:  meta(ns, name, rv),
		AddressType: discovery_v1.AddressTypeIPv4,
	}
	if svc != "" {
		s.Labels = map[string]string{ServiceNameLabel: svc}
	}
	for _, a := range addrs {
		s.Endpoints = append(s.Endpoints, discovery_v1.Endpoint{Addresses: []string{a}})
	}
	return s
}

func tlsSecret(ns, name, rv string) *core_v1.Secret {
	return &core_v1.Secret{
		ObjectMeta: meta(ns, name, rv),
		Type:       core_v1.SecretTypeTLS,
		Data:       map[string][]byte{core_v1.TLSCertKey: []byte("cert"), core_v1.TLSPrivateKeyKey: []byte("key")},
	}
}

func opaqueSecret(ns, name, rv string, data map[string][]byte) *core_v1.Secret {
	return &core_v1.Secret{ObjectMeta: meta(ns, name, rv), Type: core_v1.SecretTypeOpaque, Data: data}
}

func node(name, rv, zone string) *core_v1.Node {
	return &core_v1.Node{
		ObjectMeta: meta_v1.ObjectMeta{
			Name: name, ResourceVersion: rv,
			Labels:        map[string]string{"topology.kubernetes.io/zone": zone},
			Annotations:   map[string]string{"node.alpha.kubernetes.io/ttl": "0"},
			ManagedFields: []meta_v1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: core_v1.NodeSpec{PodCIDR: "10.0.0.0/24"},
		Status: core_v1.NodeStatus{
			Addresses: []core_v1.NodeAddress{{Type: core_v1.NodeInternalIP, Address: "192.0.2.1"}},
			Images:    []core_v1.ContainerImage{{Names: []string{"registry.example/app:v1"}, SizeBytes: 1 << 20}},
		},
	}
}

func configMap(ns, name, rv string, data map[string]string) *core_v1.ConfigMap {
	return &core_v1.ConfigMap{ObjectMeta: meta(ns, name, rv), Data: data}
}

// notes records notify calls.
type notes struct {
	mu    sync.Mutex
	kinds []string
	ch    chan string
}

func newNotes() *notes { return &notes{ch: make(chan string, 1000)} }

func (n *notes) notify(kind string) {
	n.mu.Lock()
	n.kinds = append(n.kinds, kind)
	n.mu.Unlock()
	n.ch <- kind
}

func (n *notes) count() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.kinds)
}

// drain forgets the notifications so far.
func (n *notes) drain() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.kinds = nil
	for {
		select {
		case <-n.ch:
		default:
			return
		}
	}
}

// wait returns when kind is notified, failing the test after 5 s.
func (n *notes) wait(t *testing.T, kind string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for {
		select {
		case k := <-n.ch:
			if k == kind {
				return
			}
		case <-timeout:
			t.Fatalf("no %s notification within 5 s", kind)
		}
	}
}
