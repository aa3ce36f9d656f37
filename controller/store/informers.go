package store

import (
	"context"
	"fmt"
	"strings"
	"time"

	core_v1 "k8s.io/api/core/v1"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Options say what the informers watch.
type Options struct {
	// WatchNamespace limits Ingresses, Services, EndpointSlices and
	// Secrets to one namespace; "" watches all. IngressClasses and Nodes
	// are cluster-scoped and always watched whole.
	WatchNamespace string
	// ConfigMap names the controller's global settings; zero watches no
	// ConfigMap. It may live outside WatchNamespace.
	ConfigMap types.NamespacedName
	// ResyncPeriod is the informers' resync period; 0 (the default)
	// disables resyncs, which the Store ignores anyway.
	ResyncPeriod time.Duration
}

// Informers are the client-go informers that feed a Store.
type Informers struct {
	factories []informers.SharedInformerFactory
	watched   []watched
}

// watched is one informer's handler registration, named for errors.
type watched struct {
	name string
	reg  cache.ResourceEventHandlerRegistration
}

// NewInformers returns a Store and the informers that feed it from client.
// notify is called with the kind after every relevant change (see New).
// Nothing is watched until Start.
func NewInformers(client kubernetes.Interface, opts Options, notify func(kind string)) (*Store, *Informers, error) {
	s := New(opts.ConfigMap, notify)
	inf := &Informers{}

	main := informers.NewSharedInformerFactoryWithOptions(client, opts.ResyncPeriod,
		informers.WithNamespace(opts.WatchNamespace),
		informers.WithTransform(Transform))
	inf.factories = append(inf.factories, main)
	scope := "all namespaces"
	if opts.WatchNamespace != "" {
		scope = "namespace " + opts.WatchNamespace
	}
	for _, w := range []struct {
		kind     string
		informer cache.SharedIndexInformer
		scope    string
	}{
		{KindIngressClass, main.Networking().V1().IngressClasses().Informer(), "cluster"},
		{KindIngress, main.Networking().V1().Ingresses().Informer(), scope},
		{KindService, main.Core().V1().Services().Informer(), scope},
		{KindEndpointSlice, main.Discovery().V1().EndpointSlices().Informer(), scope},
		{KindSecret, main.Core().V1().Secrets().Informer(), scope},
		{KindNode, main.Core().V1().Nodes().Informer(), "cluster"},
	} {
		if err := inf.watch(s, w.kind, w.informer, w.scope); err != nil {
			return nil, nil, err
		}
	}

	if opts.ConfigMap.Name != "" {
		// A factory of its own: the ConfigMap's namespace need not be the
		// watched one, and one object needs no namespace-wide cache.
		cm := informers.NewSharedInformerFactoryWithOptions(client, opts.ResyncPeriod,
			informers.WithNamespace(opts.ConfigMap.Namespace),
			informers.WithTransform(Transform),
			informers.WithTweakListOptions(func(lo *meta_v1.ListOptions) {
				lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", opts.ConfigMap.Name).String()
			}))
		inf.factories = append(inf.factories, cm)
		if err := inf.watch(s, KindConfigMap, cm.Core().V1().ConfigMaps().Informer(), opts.ConfigMap.String()); err != nil {
			return nil, nil, err
		}
	}
	return s, inf, nil
}

func (inf *Informers) watch(s *Store, kind string, informer cache.SharedIndexInformer, scope string) error {
	reg, err := informer.AddEventHandler(s.Handler(kind))
	if err != nil {
		return fmt.Errorf("%s informer: %w", kind, err)
	}
	inf.watched = append(inf.watched, watched{name: kind + " (" + scope + ")", reg: reg})
	return nil
}

// Start runs the informers until ctx is done.
func (inf *Informers) Start(ctx context.Context) {
	for _, f := range inf.factories {
		f.StartWithContext(ctx)
	}
}

// WaitForSync waits until every informer has listed its objects and the
// Store has seen them all, or ctx is done. Its error names the informers
// that did not sync, which usually means RBAC forbids listing them.
func (inf *Informers) WaitForSync(ctx context.Context) error {
	checkers := make([]cache.DoneChecker, len(inf.watched))
	for i, w := range inf.watched {
		checkers[i] = w.reg.HasSyncedChecker()
	}
	if cache.WaitFor(ctx, "", checkers...) {
		return nil
	}
	var missing []string
	for _, w := range inf.watched {
		if !w.reg.HasSynced() {
			missing = append(missing, w.name)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("informers did not sync: %s (check that the controller may list and watch them): %w",
		strings.Join(missing, ", "), context.Cause(ctx))
}

// Shutdown waits for the informers to stop after the context given to
// Start is done.
func (inf *Informers) Shutdown() {
	for _, f := range inf.factories {
		f.Shutdown()
	}
}

// Transform trims objects as they enter the informers' caches, to save
// memory in big clusters: it drops managedFields from every object (they
// can be larger than the object itself and nothing here reads them), trims
// Nodes with TrimNode, and drops the data of Secrets that cannot hold a
// certificate (IsTLSSecret false): the Store ignores those, but the
// informer cache would otherwise keep every service account token and
// Helm release. A Secret that gains a tls.crt arrives whole in its update
// event. Transform changes objects in place, as client-go allows, and is
// idempotent.
func Transform(obj any) (any, error) {
	switch o := obj.(type) {
	case *core_v1.Node:
		return TrimNode(o), nil
	case *core_v1.Secret:
		if !IsTLSSecret(o) {
			o.Data = nil
			o.StringData = nil
		}
	}
	if m, ok := obj.(meta_v1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// TrimNode returns a Node with only what the controller reads: its name
// and labels (the zone). It keeps the uid and resourceVersion too, which
// the informer machinery and the Store's change detection use. A cluster
// of thousands of Nodes would otherwise keep megabytes of images,
// conditions and addresses that change every few minutes.
func TrimNode(n *core_v1.Node) *core_v1.Node {
	return &core_v1.Node{ObjectMeta: meta_v1.ObjectMeta{
		Name:            n.Name,
		UID:             n.UID,
		ResourceVersion: n.ResourceVersion,
		Labels:          n.Labels,
	}}
}
