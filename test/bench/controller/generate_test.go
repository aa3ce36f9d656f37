package controllerbench

import (
	"net/netip"
	"strconv"
	"time"

	core_v1 "k8s.io/api/core/v1"
	discovery_v1 "k8s.io/api/discovery/v1"
	networking_v1 "k8s.io/api/networking/v1"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/zonal-ingress/zonal/controller/store"
)

// The size of the big cluster (DESIGN.md, "Measured targets").
const (
	bigIngresses  = 5000
	bigServices   = 10000
	perService    = 10 // endpoints: 100,000 in all
	bigNodes      = 300
	bigNamespaces = 100
)

var zones = []string{"zone-a", "zone-b", "zone-c"}

// generate returns a cluster as the API server would list it: the zonal
// IngressClass; nodes Nodes over three zones; nService Services in
// bigNamespaces namespaces, each with two ports and perService endpoints
// (every tenth Service split over two EndpointSlices; a third of the
// endpoints name their zone, the others only their Node; every twentieth
// is terminating); nIngress Ingresses, two per host, each with a Prefix
// path to one Service by port number and an Exact path to the next by
// port name.
func generate(nIngress, nService, perService, nodes int) []runtime.Object {
	var objs []runtime.Object
	objs = append(objs, &networking_v1.IngressClass{
		ObjectMeta: meta_v1.ObjectMeta{Name: "zonal", ResourceVersion: "1"},
		Spec:       networking_v1.IngressClassSpec{Controller: "zonal.dev/ingress-controller"},
	})
	for i := range nodes {
		objs = append(objs, &core_v1.Node{ObjectMeta: meta_v1.ObjectMeta{
			Name:            "node-" + strconv.Itoa(i),
			ResourceVersion: "1",
			Labels:          map[string]string{core_v1.LabelTopologyZone: zones[i%len(zones)]},
		}})
	}
	ns := func(i int) string { return "ns-" + strconv.Itoa(i%bigNamespaces) }
	addr := netip.MustParseAddr("10.0.0.1")
	for j := range nService {
		svcNS, name := ns(j/2), "svc-"+strconv.Itoa(j)
		objs = append(objs, &core_v1.Service{
			ObjectMeta: meta_v1.ObjectMeta{Namespace: svcNS, Name: name, ResourceVersion: "1"},
			Spec: core_v1.ServiceSpec{
				Selector: map[string]string{"app": name},
				Ports: []core_v1.ServicePort{
					{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: core_v1.ProtocolTCP},
					{Name: "metrics", Port: 9100, TargetPort: intstr.FromInt32(9100), Protocol: core_v1.ProtocolTCP},
				},
			},
		})
		nSlices := 1
		if j%10 == 0 {
			nSlices = 2
		}
		for k := range nSlices {
			slice := &discovery_v1.EndpointSlice{
				ObjectMeta: meta_v1.ObjectMeta{
					Namespace:       svcNS,
					Name:            name + "-" + strconv.Itoa(k),
					ResourceVersion: "1",
					Labels:          map[string]string{discovery_v1.LabelServiceName: name},
				},
				AddressType: discovery_v1.AddressTypeIPv4,
				Ports: []discovery_v1.EndpointPort{
					{Name: ptr("http"), Port: ptr(int32(8080))},
					{Name: ptr("metrics"), Port: ptr(int32(9100))},
				},
			}
			for e := k; e < perService; e += nSlices {
				n := j*perService + e
				ep := discovery_v1.Endpoint{
					Addresses:  []string{addr.String()},
					NodeName:   ptr("node-" + strconv.Itoa(n%nodes)),
					Conditions: discovery_v1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
				}
				addr = addr.Next()
				if n%3 == 0 {
					ep.Zone = ptr(zones[n%nodes%len(zones)])
				}
				if n%20 == 0 {
					ep.Conditions = discovery_v1.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}
				}
				slice.Endpoints = append(slice.Endpoints, ep)
			}
			objs = append(objs, slice)
		}
	}
	prefix, exact := networking_v1.PathTypePrefix, networking_v1.PathTypeExact
	base := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range nIngress {
		name := "ing-" + strconv.Itoa(i)
		svc := func(j int) networking_v1.IngressBackend {
			return networking_v1.IngressBackend{Service: &networking_v1.IngressServiceBackend{Name: "svc-" + strconv.Itoa(j%nService)}}
		}
		byNumber, byName := svc(2*i), svc(2*i+1)
		byNumber.Service.Port.Number = 80
		byName.Service.Port.Name = "http"
		objs = append(objs, &networking_v1.Ingress{
			ObjectMeta: meta_v1.ObjectMeta{
				Namespace:         ns(i),
				Name:              name,
				ResourceVersion:   "1",
				CreationTimestamp: meta_v1.NewTime(base.Add(time.Duration(i) * time.Second)),
			},
			Spec: networking_v1.IngressSpec{
				IngressClassName: ptr("zonal"),
				Rules: []networking_v1.IngressRule{{
					Host: "app-" + strconv.Itoa(i/2) + ".example.com",
					IngressRuleValue: networking_v1.IngressRuleValue{HTTP: &networking_v1.HTTPIngressRuleValue{
						Paths: []networking_v1.HTTPIngressPath{
							{Path: "/" + name, PathType: &prefix, Backend: byNumber},
							{Path: "/" + name + "/api/v1", PathType: &exact, Backend: byName},
						},
					}},
				}},
			},
		})
	}
	return objs
}

// probe is the small part of a cluster that a benchmark sends requests to:
// host probe.test routes to Service bench/probe, whose EndpointSlice has
// one endpoint, at.
func probe(at netip.AddrPort) []runtime.Object {
	prefix := networking_v1.PathTypePrefix
	return []runtime.Object{
		&networking_v1.Ingress{
			ObjectMeta: meta_v1.ObjectMeta{Namespace: "bench", Name: "probe", ResourceVersion: "1",
				CreationTimestamp: meta_v1.NewTime(time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC))},
			Spec: networking_v1.IngressSpec{
				IngressClassName: ptr("zonal"),
				Rules: []networking_v1.IngressRule{{
					Host: "probe.test",
					IngressRuleValue: networking_v1.IngressRuleValue{HTTP: &networking_v1.HTTPIngressRuleValue{
						Paths: []networking_v1.HTTPIngressPath{{Path: "/", PathType: &prefix, Backend: networking_v1.IngressBackend{
							Service: &networking_v1.IngressServiceBackend{Name: "probe", Port: networking_v1.ServiceBackendPort{Number: 80}},
						}}},
					}},
				}},
			},
		},
		&core_v1.Service{
			ObjectMeta: meta_v1.ObjectMeta{Namespace: "bench", Name: "probe", ResourceVersion: "1"},
			Spec: core_v1.ServiceSpec{Ports: []core_v1.ServicePort{
				{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080), Protocol: core_v1.ProtocolTCP},
			}},
		},
		probeSlice(at, 1),
	}
}

// probeSlice is Service bench/probe's EndpointSlice with one ready endpoint
// in zone-a, at resourceVersion version.
func probeSlice(at netip.AddrPort, version int) *discovery_v1.EndpointSlice {
	return &discovery_v1.EndpointSlice{
		ObjectMeta: meta_v1.ObjectMeta{
			Namespace:       "bench",
			Name:            "probe-0",
			ResourceVersion: strconv.Itoa(version),
			Labels:          map[string]string{discovery_v1.LabelServiceName: "probe"},
		},
		AddressType: discovery_v1.AddressTypeIPv4,
		Ports:       []discovery_v1.EndpointPort{{Name: ptr("http"), Port: ptr(int32(at.Port()))}},
		Endpoints: []discovery_v1.Endpoint{{
			Addresses:  []string{at.Addr().String()},
			Zone:       ptr("zone-a"),
			Conditions: discovery_v1.EndpointConditions{Ready: ptr(true), Serving: ptr(true), Terminating: ptr(false)},
		}},
	}
}

// snapshotOf files objs into a store snapshot, as the informers would.
func snapshotOf(objs []runtime.Object) *store.Snapshot {
	s := store.NewSnapshot()
	nn := func(m meta_v1.ObjectMeta) types.NamespacedName {
		return types.NamespacedName{Namespace: m.Namespace, Name: m.Name}
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *networking_v1.IngressClass:
			s.IngressClasses[o.Name] = o
		case *networking_v1.Ingress:
			s.Ingresses[nn(o.ObjectMeta)] = o
		case *core_v1.Service:
			s.Services[nn(o.ObjectMeta)] = o
		case *discovery_v1.EndpointSlice:
			svc := types.NamespacedName{Namespace: o.Namespace, Name: o.Labels[discovery_v1.LabelServiceName]}
			if s.EndpointSlices[svc] == nil {
				s.EndpointSlices[svc] = map[string]*discovery_v1.EndpointSlice{}
			}
			s.EndpointSlices[svc][o.Name] = o
		case *core_v1.Secret:
			s.Secrets[nn(o.ObjectMeta)] = o
		case *core_v1.Node:
			s.Nodes[o.Name] = o
		}
	}
	return s
}

func ptr[T any](v T) *T { return &v }
