package loop

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	core_v1 "k8s.io/api/core/v1"
	discovery_v1 "k8s.io/api/discovery/v1"
	networking_v1 "k8s.io/api/networking/v1"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/controller/model"
	"github.com/zonal-ingress/zonal/controller/store"
)

// cluster is a store fed directly through its informer handlers; its
// changes notify the loop, as the informers' do.
type cluster struct {
	s      *store.Store
	rv     int
	notify func(kind string)
}

func newCluster() *cluster {
	c := &cluster{}
	c.s = store.New(types.NamespacedName{}, func(kind string) {
		if c.notify != nil {
			c.notify(kind)
		}
	})
	return c
}

func (c *cluster) put(kind string, obj meta_v1.Object) {
	c.rv++
	obj.SetResourceVersion(strconv.Itoa(c.rv))
	c.s.Handler(kind).OnAdd(obj, false)
}

func (c *cluster) ingressClass() {
	c.put(store.KindIngressClass, &networking_v1.IngressClass{
		ObjectMeta: meta_v1.ObjectMeta{Name: "zonal"},
		Spec:       networking_v1.IngressClassSpec{Controller: "zonal.dev/ingress-controller"},
	})
}

// ingress routes each path (Prefix) of host to service web, port 80.
func (c *cluster) ingress(paths ...string) {
	var rules []networking_v1.HTTPIngressPath
	prefix := networking_v1.PathTypePrefix
	for _, p := range paths {
		rules = append(rules, networking_v1.HTTPIngressPath{
			Path: p, PathType: &prefix,
			Backend: networking_v1.IngressBackend{Service: &networking_v1.IngressServiceBackend{
				Name: "web", Port: networking_v1.ServiceBackendPort{Number: 80},
			}},
		})
	}
	class := "zonal"
	c.put(store.KindIngress, &networking_v1.Ingress{
		ObjectMeta: meta_v1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: networking_v1.IngressSpec{
			IngressClassName: &class,
			Rules: []networking_v1.IngressRule{{
				Host:             "web.example",
				IngressRuleValue: networking_v1.IngressRuleValue{HTTP: &networking_v1.HTTPIngressRuleValue{Paths: rules}},
			}},
		},
	})
}

func (c *cluster) service() {
	c.put(store.KindService, &core_v1.Service{
		ObjectMeta: meta_v1.ObjectMeta{Namespace: "demo", Name: "web"},
		Spec: core_v1.ServiceSpec{Ports: []core_v1.ServicePort{{
			Port: 80, TargetPort: intstr.FromInt32(8080),
		}}},
	})
}

func (c *cluster) endpoints(addrs ...string) {
	port := int32(8080)
	var eps []discovery_v1.Endpoint
	for _, a := range addrs {
		eps = append(eps, discovery_v1.Endpoint{Addresses: []string{a}})
	}
	c.put(store.KindEndpointSlice, &discovery_v1.EndpointSlice{
		ObjectMeta: meta_v1.ObjectMeta{Namespace: "demo", Name: "web-1",
			Labels: map[string]string{store.ServiceNameLabel: "web"}},
		AddressType: discovery_v1.AddressTypeIPv4,
		Ports:       []discovery_v1.EndpointPort{{Port: &port}},
		Endpoints:   eps,
	})
}

// recorder stands in for the table publisher and NGINX.
type recorder struct {
	published []*table.Table
	applied   [][]byte
	applyErr  error
	renders   int
}

func (r *recorder) Publish(t *table.Table) (table.Published, error) {
	r.published = append(r.published, t)
	return table.Published{Generation: uint64(len(r.published))}, nil
}

func (r *recorder) Apply(conf []byte) error {
	if r.applyErr != nil {
		return r.applyErr
	}
	r.applied = append(r.applied, conf)
	return nil
}

// render stands in for nginx.Render: the configuration is the list of
// locations, so it changes exactly when they do.
func render(m *model.Model) ([]byte, error) {
	var b []byte
	for _, s := range m.Servers {
		for _, l := range s.Locations {
			b = append(b, s.Host+" "+l.Path+" "+l.Backend+"\n"...)
		}
	}
	return b, nil
}

func newLoop(c *cluster, r *recorder) *Loop {
	l := &Loop{
		Store:  c.s,
		Model:  model.Options{IngressClass: "zonal", ControllerClass: "zonal.dev/ingress-controller"},
		Tables: r,
		NGINX:  r,
		Render: func(m *model.Model) ([]byte, error) {
			r.renders++
			return render(m)
		},
		Log: slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	c.notify = l.NotifyKind
	return l
}

func readyCluster() *cluster {
	c := newCluster()
	c.ingressClass()
	c.service()
	c.endpoints("10.0.0.1")
	c.ingress("/")
	return c
}

func TestEndpointChangePublishesWithoutApply(t *testing.T) {
	c, r := readyCluster(), &recorder{}
	l := newLoop(c, r)
	first := l.Init()
	if first.Published == nil || !first.Reloaded || len(r.applied) != 1 {
		t.Fatalf("first pass: %+v, applied %d; want a table and a configuration", first, len(r.applied))
	}

	c.endpoints("10.0.0.1", "10.0.0.2")
	renders := r.renders
	res := l.Pass(time.Now())
	if res.Published == nil || res.Reloaded || len(r.applied) != 1 {
		t.Fatalf("endpoint change: published %v, reloaded %v, applied %d; want table only", res.Published, res.Reloaded, len(r.applied))
	}
	if r.renders != renders {
		t.Errorf("an endpoint change rendered nginx.conf %d times; it cannot change it", r.renders-renders)
	}
	if got := len(r.published[len(r.published)-1].Backends[0].Peers); got != 2 {
		t.Errorf("published table has %d peers, want 2", got)
	}

	res = l.Pass(time.Now())
	if res.Published != nil || res.Reloaded {
		t.Errorf("pass with nothing changed published %v, reloaded %v", res.Published, res.Reloaded)
	}
}

func TestIngressChangeApplies(t *testing.T) {
	c, r := readyCluster(), &recorder{}
	l := newLoop(c, r)
	l.Init()
	c.ingress("/", "/api")
	res := l.Pass(time.Now())
	if !res.Reloaded || len(r.applied) != 2 {
		t.Fatalf("Ingress change: reloaded %v, applied %d; want the new configuration applied", res.Reloaded, len(r.applied))
	}
}

func TestRefusedConfigurationIsNotRetriedUntilItChanges(t *testing.T) {
	c, r := readyCluster(), &recorder{}
	l := newLoop(c, r)
	l.Init()

	r.applyErr = errors.New("nginx -t: bad")
	c.ingress("/", "/api")
	if res := l.Pass(time.Now()); res.ReloadErr == nil {
		t.Fatal("refused configuration reported no error")
	}
	r.applyErr = nil
	c.endpoints("10.0.0.3") // unrelated change: same configuration
	if res := l.Pass(time.Now()); res.Reloaded || res.ReloadErr != nil {
		t.Errorf("the refused configuration was tried again: %+v", res)
	}
	c.ingress("/", "/api", "/v2")
	if res := l.Pass(time.Now()); !res.Reloaded {
		t.Errorf("a changed configuration was not applied: %+v", res)
	}
}

func TestReloadsAreRateLimited(t *testing.T) {
	c, r := readyCluster(), &recorder{}
	l := newLoop(c, r)
	l.ReloadMinInterval = time.Minute
	start := time.Now()
	l.Pass(start)

	c.ingress("/", "/api")
	res := l.Pass(start.Add(10 * time.Second))
	if res.Reloaded || res.Deferred != 50*time.Second {
		t.Fatalf("reload within the interval: reloaded %v, deferred %v; want deferred 50s", res.Reloaded, res.Deferred)
	}
	if res := l.Pass(start.Add(time.Minute)); !res.Reloaded {
		t.Errorf("reload after the interval did not happen: %+v", res)
	}
}

func TestProblemsAreReportedOnceWhileTheyLast(t *testing.T) {
	c, r := readyCluster(), &recorder{}
	l := newLoop(c, r)
	var reported []model.Problem
	l.Problem = func(p model.Problem) { reported = append(reported, p) }

	c.ingress("/", "/bad;path")
	l.Pass(time.Now())
	l.Pass(time.Now())
	if len(reported) != 1 || reported[0].Name != "web" || reported[0].Field == "" {
		t.Fatalf("reported %+v; want one problem naming Ingress web and its field", reported)
	}
	c.ingress("/")
	l.Pass(time.Now())
	c.ingress("/", "/bad;path")
	l.Pass(time.Now())
	if len(reported) != 2 {
		t.Errorf("a problem that came back was reported %d times in all, want 2", len(reported))
	}
}

func TestRunCoalescesBursts(t *testing.T) {
	c, r := readyCluster(), &recorder{}
	l := newLoop(c, r)
	l.HoldOff = 20 * time.Millisecond
	l.MaxHoldOff = time.Second
	l.Init()

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var passes atomic.Int32
	done := make(chan struct{})
	go func() {
		l.Run(ctx, func(Result) { passes.Add(1) })
		close(done)
	}()
	for i := 0; i < 200; i++ {
		c.endpoints("10.0.0.1", "10.0.1."+strconv.Itoa(i%250+1))
		l.Notify()
	}
	deadline := time.Now().Add(5 * time.Second)
	for passes.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let a pass for a late notification finish
	cancel()
	<-done
	if n := passes.Load(); n == 0 || n > 20 {
		t.Errorf("200 notifications gave %d passes; want a few", n)
	}
	last := r.published[len(r.published)-1]
	if got := last.Backends[0].Peers[1].Addr.String(); got != "10.0.1.200" {
		t.Errorf("last published peer %s, want the last update's 10.0.1.200", got)
	}
}
