package store

import (
	"maps"
	"sync"

	core_v1 "k8s.io/api/core/v1"
	discovery_v1 "k8s.io/api/discovery/v1"
	networking_v1 "k8s.io/api/networking/v1"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// The kinds a Store holds, as passed to its notify function.
const (
	KindIngressClass  = "IngressClass"
	KindIngress       = "Ingress"
	KindService       = "Service"
	KindEndpointSlice = "EndpointSlice"
	KindSecret        = "Secret"
	KindNode          = "Node"
	KindConfigMap     = "ConfigMap"
)

// Kinds lists every kind a Store holds, in a fixed order.
var Kinds = []string{KindIngressClass, KindIngress, KindService, KindEndpointSlice, KindSecret, KindNode, KindConfigMap}

// dirty bits, one per kind: the kinds changed since the last snapshot.
const (
	dirtyIngressClasses uint8 = 1 << iota
	dirtyIngresses
	dirtyServices
	dirtyEndpointSlices
	dirtySecrets
	dirtyNodes
	dirtyConfigMap
)

// ServiceNameLabel ties an EndpointSlice to its Service.
const ServiceNameLabel = discovery_v1.LabelServiceName

// Store holds the watched objects and hands out snapshots. It is safe for
// concurrent use: informers feed it from their own goroutines through the
// handlers of Handler, and the sync loop calls Snapshot from another.
//
// Snapshot must stay cheap when clusters are big and endpoints churn, so a
// Store keeps live maps, which handlers change, and the last snapshot,
// whose maps never change. Snapshot copies only the maps of kinds that
// changed since the last one and shares the others; with nothing changed it
// returns the last snapshot itself. The per-Service maps of EndpointSlices
// are copied on write (a change to one Service's slices replaces that
// Service's map), so a snapshot copies only the outer map.
type Store struct {
	configMap types.NamespacedName
	notify    func(kind string)

	mu             sync.Mutex
	ingressClasses map[string]*networking_v1.IngressClass
	ingresses      map[types.NamespacedName]*networking_v1.Ingress
	services       map[types.NamespacedName]*core_v1.Service
	endpointSlices map[types.NamespacedName]map[string]*discovery_v1.EndpointSlice
	// sliceService maps a slice (namespace/name) to the Service it is
	// filed under, for deletes by key and for slices whose label changes.
	sliceService map[types.NamespacedName]types.NamespacedName
	secrets      map[types.NamespacedName]*core_v1.Secret
	nodes        map[string]*core_v1.Node
	config       *core_v1.ConfigMap

	dirty uint8
	last  *Snapshot
}

// New returns an empty Store. configMap names the one ConfigMap the Store
// keeps (zero: none). notify, if not nil, is called with the kind after
// every change that can matter to the model, outside the Store's lock, on
// the informer's goroutine: it should only queue work.
func New(configMap types.NamespacedName, notify func(kind string)) *Store {
	if notify == nil {
		notify = func(string) {}
	}
	return &Store{
		configMap:      configMap,
		notify:         notify,
		ingressClasses: map[string]*networking_v1.IngressClass{},
		ingresses:      map[types.NamespacedName]*networking_v1.Ingress{},
		services:       map[types.NamespacedName]*core_v1.Service{},
		endpointSlices: map[types.NamespacedName]map[string]*discovery_v1.EndpointSlice{},
		sliceService:   map[types.NamespacedName]types.NamespacedName{},
		secrets:        map[types.NamespacedName]*core_v1.Secret{},
		nodes:          map[string]*core_v1.Node{},
		dirty:          ^uint8(0),
	}
}

// Snapshot returns a consistent view of every object the Store holds. The
// snapshot may share maps with earlier snapshots; callers must not modify
// it.
func (s *Store) Snapshot() *Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dirty == 0 && s.last != nil {
		return s.last
	}
	prev := s.last
	if prev == nil {
		prev = &Snapshot{}
	}
	next := *prev
	if s.dirty&dirtyIngressClasses != 0 {
		next.IngressClasses = maps.Clone(s.ingressClasses)
	}
	if s.dirty&dirtyIngresses != 0 {
		next.Ingresses = maps.Clone(s.ingresses)
	}
	if s.dirty&dirtyServices != 0 {
		next.Services = maps.Clone(s.services)
	}
	if s.dirty&dirtyEndpointSlices != 0 {
		next.EndpointSlices = maps.Clone(s.endpointSlices)
	}
	if s.dirty&dirtySecrets != 0 {
		next.Secrets = maps.Clone(s.secrets)
	}
	if s.dirty&dirtyNodes != 0 {
		next.Nodes = maps.Clone(s.nodes)
	}
	next.ConfigMap = s.config
	s.dirty = 0
	s.last = &next
	return s.last
}

// Handler returns the event handler for one kind (one of the Kind
// constants), for its informer, or for tests that feed objects directly. It
// panics on an unknown kind.
func (s *Store) Handler(kind string) cache.ResourceEventHandler {
	switch kind {
	case KindIngressClass, KindIngress, KindService, KindEndpointSlice, KindSecret, KindNode, KindConfigMap:
		return handler{s: s, kind: kind}
	}
	panic("store: no handler for kind " + kind)
}

// handler feeds one kind's informer events into a Store.
type handler struct {
	s    *Store
	kind string
}

func (h handler) OnAdd(obj any, _ bool) { h.s.apply(h.kind, obj) }

func (h handler) OnUpdate(oldObj, newObj any) {
	// Resyncs and relists deliver objects the Store has already seen.
	if sameVersion(oldObj, newObj) {
		return
	}
	h.s.apply(h.kind, newObj)
}

func (h handler) OnDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		// The watch missed the delete and a relist found the object gone;
		// the tombstone's object may be stale, but its key is right.
		ns, name, err := cache.SplitMetaNamespaceKey(tomb.Key)
		if err != nil {
			return
		}
		h.s.delete(h.kind, types.NamespacedName{Namespace: ns, Name: name})
		return
	}
	if m, ok := obj.(meta_v1.Object); ok {
		h.s.delete(h.kind, key(m))
	}
}

// sameVersion reports whether two objects carry the same, known,
// resourceVersion. An empty resourceVersion (objects that never went
// through an API server) counts as changed.
func sameVersion(a, b any) bool {
	am, ok1 := a.(meta_v1.Object)
	bm, ok2 := b.(meta_v1.Object)
	if !ok1 || !ok2 {
		return false
	}
	rv := am.GetResourceVersion()
	return rv != "" && rv == bm.GetResourceVersion()
}

// apply stores an added or updated object and notifies if it changed
// something the model can see.
func (s *Store) apply(kind string, obj any) {
	s.mu.Lock()
	changed := false
	switch o := obj.(type) {
	case *networking_v1.IngressClass:
		changed = putIfNewer(s.ingressClasses, o.Name, o)
		s.mark(changed, dirtyIngressClasses)
	case *networking_v1.Ingress:
		changed = putIfNewer(s.ingresses, key(o), o)
		s.mark(changed, dirtyIngresses)
	case *core_v1.Service:
		changed = putIfNewer(s.services, key(o), o)
		s.mark(changed, dirtyServices)
	case *discovery_v1.EndpointSlice:
		changed = s.putSlice(o)
		s.mark(changed, dirtyEndpointSlices)
	case *core_v1.Secret:
		if IsTLSSecret(o) {
			changed = putIfNewer(s.secrets, key(o), o)
		} else {
			// An Opaque Secret that lost its certificate.
			changed = remove(s.secrets, key(o))
		}
		s.mark(changed, dirtySecrets)
	case *core_v1.Node:
		changed = s.putNode(o)
		s.mark(changed, dirtyNodes)
	case *core_v1.ConfigMap:
		if key(o) == s.configMap && (s.config == nil || !sameVersion(s.config, o)) {
			s.config = o
			changed = true
		}
		s.mark(changed, dirtyConfigMap)
	}
	s.mu.Unlock()
	if changed {
		s.notify(kind)
	}
}

// delete removes the object of one kind with a name (namespace "" for
// cluster-scoped kinds).
func (s *Store) delete(kind string, nn types.NamespacedName) {
	name := nn.Name
	s.mu.Lock()
	changed := false
	switch kind {
	case KindIngressClass:
		changed = remove(s.ingressClasses, name)
		s.mark(changed, dirtyIngressClasses)
	case KindIngress:
		changed = remove(s.ingresses, nn)
		s.mark(changed, dirtyIngresses)
	case KindService:
		changed = remove(s.services, nn)
		s.mark(changed, dirtyServices)
	case KindEndpointSlice:
		changed = s.removeSlice(nn)
		s.mark(changed, dirtyEndpointSlices)
	case KindSecret:
		changed = remove(s.secrets, nn)
		s.mark(changed, dirtySecrets)
	case KindNode:
		changed = remove(s.nodes, name)
		s.mark(changed, dirtyNodes)
	case KindConfigMap:
		if nn == s.configMap && s.config != nil {
			s.config = nil
			changed = true
		}
		s.mark(changed, dirtyConfigMap)
	}
	s.mu.Unlock()
	if changed {
		s.notify(kind)
	}
}

func (s *Store) mark(changed bool, bit uint8) {
	if changed {
		s.dirty |= bit
	}
}

// putSlice files a slice under its Service, copying that Service's map so
// that snapshots holding the old one never see it change.
func (s *Store) putSlice(o *discovery_v1.EndpointSlice) bool {
	nn := key(o)
	svcName := o.Labels[ServiceNameLabel]
	if svcName == "" {
		// Not managed for a Service (or its label was removed): nothing
		// the model could route to.
		return s.removeSlice(nn)
	}
	svc := types.NamespacedName{Namespace: o.Namespace, Name: svcName}
	changed := false
	if old, ok := s.sliceService[nn]; ok && old != svc {
		s.removeSlice(nn)
		changed = true
	}
	group := s.endpointSlices[svc]
	if cur, ok := group[o.Name]; ok && sameVersion(cur, o) {
		return changed
	}
	next := make(map[string]*discovery_v1.EndpointSlice, len(group)+1)
	maps.Copy(next, group)
	next[o.Name] = o
	s.endpointSlices[svc] = next
	s.sliceService[nn] = svc
	return true
}

func (s *Store) removeSlice(nn types.NamespacedName) bool {
	svc, ok := s.sliceService[nn]
	if !ok {
		return false
	}
	delete(s.sliceService, nn)
	group := s.endpointSlices[svc]
	if len(group) <= 1 {
		delete(s.endpointSlices, svc)
		return true
	}
	next := make(map[string]*discovery_v1.EndpointSlice, len(group)-1)
	for name, slice := range group {
		if name != nn.Name {
			next[name] = slice
		}
	}
	s.endpointSlices[svc] = next
	return true
}

// putNode keeps a Node only when its labels changed: they are all the
// model reads (see TrimNode), and Nodes change status every few minutes.
func (s *Store) putNode(o *core_v1.Node) bool {
	if cur, ok := s.nodes[o.Name]; ok && maps.Equal(cur.Labels, o.Labels) {
		return false
	}
	s.nodes[o.Name] = o
	return true
}

// putIfNewer stores o under k unless the same version is already there.
func putIfNewer[K comparable, V meta_v1.Object](m map[K]V, k K, o V) bool {
	if cur, ok := m[k]; ok && sameVersion(cur, o) {
		return false
	}
	m[k] = o
	return true
}

func remove[K comparable, V any](m map[K]V, k K) bool {
	if _, ok := m[k]; !ok {
		return false
	}
	delete(m, k)
	return true
}

func key(o meta_v1.Object) types.NamespacedName {
	return types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}
}

// IsTLSSecret reports whether a Secret can hold a certificate for NGINX:
// type kubernetes.io/tls, or Opaque with a tls.crt key. The Store keeps
// only these.
func IsTLSSecret(s *core_v1.Secret) bool {
	switch s.Type {
	case core_v1.SecretTypeTLS:
		return true
	case core_v1.SecretTypeOpaque, "":
		_, ok := s.Data[core_v1.TLSCertKey]
		if !ok {
			_, ok = s.StringData[core_v1.TLSCertKey]
		}
		return ok
	}
	return false
}
