package store

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	core_v1 "k8s.io/api/core/v1"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

func keys[K comparable, V any](m map[K]V) []string {
	var out []string
	for k := range m {
		out = append(out, fmt.Sprint(k))
	}
	slices.Sort(out)
	return out
}

func TestTombstones(t *testing.T) {
	n := newNotes()
	s := New(types.NamespacedName{}, n.notify)
	s.Handler(KindIngress).OnAdd(ingress("shop", "web", "1", "a.example"), true)
	s.Handler(KindIngress).OnAdd(ingress("shop", "api", "2", "b.example"), true)
	s.Handler(KindEndpointSlice).OnAdd(slice("shop", "web-abc", "3", "web", "10.0.0.1"), true)
	s.Handler(KindNode).OnAdd(node("node-a", "4", "zone-a"), true)
	n.drain()

	for name, tc := range map[string]struct {
		kind string
		tomb cache.DeletedFinalStateUnknown
	}{
		"ingress with stale object": {KindIngress, cache.DeletedFinalStateUnknown{
			Key: "shop/web", Obj: ingress("shop", "web", "0", "stale.example")}},
		"ingress with key only": {KindIngress, cache.DeletedFinalStateUnknown{Key: "shop/api"}},
		"endpointslice":         {KindEndpointSlice, cache.DeletedFinalStateUnknown{Key: "shop/web-abc"}},
		"node":                  {KindNode, cache.DeletedFinalStateUnknown{Key: "node-a", Obj: node("node-a", "4", "zone-a")}},
	} {
		t.Run(name, func(t *testing.T) {
			n.drain()
			s.Handler(tc.kind).OnDelete(tc.tomb)
			if n.count() != 1 {
				t.Errorf("notified %d times, want once", n.count())
			}
		})
	}
	snap := s.Snapshot()
	if len(snap.Ingresses)+len(snap.EndpointSlices)+len(snap.Nodes) != 0 {
		t.Errorf("left after tombstones: %v %v %v", keys(snap.Ingresses), keys(snap.EndpointSlices), keys(snap.Nodes))
	}
	n.drain()
	s.Handler(KindIngress).OnDelete(cache.DeletedFinalStateUnknown{Key: "shop/never-seen"})
	if n.count() != 0 {
		t.Error("deleting an unknown object notified")
	}
}

func TestHandlerChanges(t *testing.T) {
	web := types.NamespacedName{Namespace: "shop", Name: "web"}
	api := types.NamespacedName{Namespace: "shop", Name: "api"}
	for name, tc := range map[string]struct {
		kind   string
		before []any // added first
		event  func(h cache.ResourceEventHandler)
		notify bool
		check  func(t *testing.T, snap *Snapshot)
	}{
		"resync of an unchanged object": {
			kind:   KindService,
			before: []any{service("shop", "web", "5")},
			event: func(h cache.ResourceEventHandler) {
				h.OnUpdate(service("shop", "web", "5"), service("shop", "web", "5"))
			},
		},
		"re-add of a known version": {
			kind:   KindService,
			before: []any{service("shop", "web", "5")},
			event:  func(h cache.ResourceEventHandler) { h.OnAdd(service("shop", "web", "5"), false) },
		},
		"objects without resourceVersion always count": {
			kind:   KindService,
			before: []any{service("shop", "web", "")},
			event:  func(h cache.ResourceEventHandler) { h.OnUpdate(service("shop", "web", ""), service("shop", "web", "")) },
			notify: true,
		},
		"slice moves to another Service": {
			kind:   KindEndpointSlice,
			before: []any{slice("shop", "s1", "1", "web"), slice("shop", "s2", "2", "web")},
			event: func(h cache.ResourceEventHandler) {
				h.OnUpdate(slice("shop", "s1", "1", "web"), slice("shop", "s1", "3", "api"))
			},
			notify: true,
			check: func(t *testing.T, snap *Snapshot) {
				if got := keys(snap.EndpointSlices[web]); !slices.Equal(got, []string{"s2"}) {
					t.Errorf("web slices %v, want s2", got)
				}
				if got := keys(snap.EndpointSlices[api]); !slices.Equal(got, []string{"s1"}) {
					t.Errorf("api slices %v, want s1", got)
				}
			},
		},
		"slice loses its Service label": {
			kind:   KindEndpointSlice,
			before: []any{slice("shop", "s1", "1", "web")},
			event: func(h cache.ResourceEventHandler) {
				h.OnUpdate(slice("shop", "s1", "1", "web"), slice("shop", "s1", "2", ""))
			},
			notify: true,
			check: func(t *testing.T, snap *Snapshot) {
				if len(snap.EndpointSlices) != 0 {
					t.Errorf("slices %v, want none", keys(snap.EndpointSlices))
				}
			},
		},
		"opaque Secret gains a certificate": {
			kind:   KindSecret,
			before: []any{opaqueSecret("shop", "web", "1", map[string][]byte{"a": nil})},
			event: func(h cache.ResourceEventHandler) {
				h.OnUpdate(opaqueSecret("shop", "web", "1", nil), opaqueSecret("shop", "web", "2", map[string][]byte{"tls.crt": nil}))
			},
			notify: true,
			check: func(t *testing.T, snap *Snapshot) {
				if snap.Secrets[web] == nil {
					t.Error("Secret with tls.crt missing")
				}
			},
		},
		"opaque Secret loses its certificate": {
			kind:   KindSecret,
			before: []any{opaqueSecret("shop", "web", "1", map[string][]byte{"tls.crt": nil})},
			event: func(h cache.ResourceEventHandler) {
				h.OnUpdate(opaqueSecret("shop", "web", "1", nil), opaqueSecret("shop", "web", "2", map[string][]byte{"a": nil}))
			},
			notify: true,
			check: func(t *testing.T, snap *Snapshot) {
				if len(snap.Secrets) != 0 {
					t.Errorf("Secrets %v, want none", keys(snap.Secrets))
				}
			},
		},
		"other Secrets are ignored": {
			kind: KindSecret,
			event: func(h cache.ResourceEventHandler) {
				h.OnAdd(opaqueSecret("shop", "db", "1", map[string][]byte{"password": nil}), false)
				h.OnDelete(opaqueSecret("shop", "db", "1", nil))
			},
		},
		"other ConfigMaps are ignored": {
			kind: KindConfigMap,
			event: func(h cache.ResourceEventHandler) {
				h.OnAdd(configMap("zonal", "other", "1", nil), false)
				h.OnDelete(configMap("zonal", "other", "1", nil))
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			n := newNotes()
			s := New(settings, n.notify)
			h := s.Handler(tc.kind)
			for _, o := range tc.before {
				h.OnAdd(o, true)
			}
			n.drain()
			tc.event(h)
			if got := n.count() > 0; got != tc.notify {
				t.Errorf("notified: %v, want %v", got, tc.notify)
			}
			if tc.check != nil {
				tc.check(t, s.Snapshot())
			}
		})
	}
}

func TestSnapshotSharesUnchangedMaps(t *testing.T) {
	s := New(types.NamespacedName{}, nil)
	s.Handler(KindIngress).OnAdd(ingress("shop", "web", "1", "a.example"), true)
	s.Handler(KindEndpointSlice).OnAdd(slice("shop", "s1", "2", "web", "10.0.0.1"), true)
	s.Handler(KindEndpointSlice).OnAdd(slice("shop", "s3", "3", "api", "10.0.0.3"), true)
	first := s.Snapshot()
	if s.Snapshot() != first {
		t.Error("no change, yet a new snapshot")
	}

	s.Handler(KindEndpointSlice).OnAdd(slice("shop", "s2", "4", "web", "10.0.0.2"), false)
	second := s.Snapshot()
	if second == first {
		t.Fatal("a slice was added, yet the same snapshot")
	}
	if reflect.ValueOf(second.Ingresses).Pointer() != reflect.ValueOf(first.Ingresses).Pointer() {
		t.Error("Ingresses unchanged but copied")
	}
	web := types.NamespacedName{Namespace: "shop", Name: "web"}
	if got := keys(first.EndpointSlices[web]); !slices.Equal(got, []string{"s1"}) {
		t.Errorf("first snapshot changed under its reader: web slices %v", got)
	}
	if got := keys(second.EndpointSlices[web]); !slices.Equal(got, []string{"s1", "s2"}) {
		t.Errorf("web slices %v, want s1 s2", got)
	}
	api := types.NamespacedName{Namespace: "shop", Name: "api"}
	if reflect.ValueOf(second.EndpointSlices[api]).Pointer() != reflect.ValueOf(first.EndpointSlices[api]).Pointer() {
		t.Error("slices of an unchanged Service copied")
	}
}

func TestTransform(t *testing.T) {
	n := node("node-a", "7", "zone-a")
	n.UID = "u1"
	got, err := Transform(n)
	if err != nil {
		t.Fatal(err)
	}
	want := &core_v1.Node{ObjectMeta: meta_v1.ObjectMeta{
		Name: "node-a", UID: "u1", ResourceVersion: "7",
		Labels: map[string]string{"topology.kubernetes.io/zone": "zone-a"},
	}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Transform(node) = %+v, want %+v", got, want)
	}
	if again, _ := Transform(got); !reflect.DeepEqual(again, want) {
		t.Error("Transform is not idempotent on Nodes")
	}

	svc := service("shop", "web", "1")
	svc.ManagedFields = []meta_v1.ManagedFieldsEntry{{Manager: "kubectl"}}
	svc.Annotations = map[string]string{"a": "b"}
	out, _ := Transform(svc)
	if o := out.(*core_v1.Service); o.ManagedFields != nil || o.Annotations["a"] != "b" || len(o.Spec.Ports) != 1 {
		t.Errorf("Transform(service) = %+v, want it whole but for managedFields", o)
	}

	cert := tlsSecret("shop", "cert", "1")
	if out, _ := Transform(cert); len(out.(*core_v1.Secret).Data) != 2 {
		t.Error("Transform stripped a TLS Secret")
	}
	other := opaqueSecret("shop", "db", "1", map[string][]byte{"password": []byte("x")})
	if out, _ := Transform(other); out.(*core_v1.Secret).Data != nil || out.(*core_v1.Secret).Name != "db" {
		t.Error("Transform kept the data of a Secret the Store ignores")
	}
}

func BenchmarkSnapshot(b *testing.B) {
	s := New(types.NamespacedName{}, nil)
	for i := range 5000 {
		s.Handler(KindIngress).OnAdd(ingress("ns", fmt.Sprintf("ing-%d", i), "1", "h.example"), true)
	}
	for i := range 10000 {
		svc := fmt.Sprintf("svc-%d", i)
		s.Handler(KindService).OnAdd(service("ns", svc, "1"), true)
		s.Handler(KindEndpointSlice).OnAdd(slice("ns", svc+"-abc", "1", svc, "10.0.0.1"), true)
	}
	for i := range 1000 {
		s.Handler(KindNode).OnAdd(node(fmt.Sprintf("node-%d", i), "1", "zone-a"), true)
	}
	b.Run("all kinds changed", func(b *testing.B) {
		for b.Loop() {
			s.mu.Lock()
			s.dirty = ^uint8(0)
			s.mu.Unlock()
			s.Snapshot()
		}
	})
	b.Run("one slice changed", func(b *testing.B) {
		rv := 1
		for b.Loop() {
			rv++
			s.Handler(KindEndpointSlice).OnUpdate(nil, slice("ns", "svc-7-abc", fmt.Sprint(rv), "svc-7", "10.0.0.2"))
			s.Snapshot()
		}
	})
}
