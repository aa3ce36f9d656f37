package model

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	core_v1 "k8s.io/api/core/v1"
	networking_v1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/controller/store"
)

// Build turns a snapshot into the model. It reads s and never changes it,
// performs no I/O, and returns the same model for the same snapshot (its one
// side effect is remembering validated Secrets in o.Certificates, which
// changes how fast Build runs, never what it returns).
//
// It runs in steps, each a small function of the ones before:
//
//  1. Select the Ingresses of our class (class.go) and order them oldest
//     first (creationTimestamp, then namespace/name): in every conflict
//     below, the oldest wins and the others get a problem (except where an
//     Exact path beats a Prefix path, or two rules route alike: paths.go).
//  2. Resolve --default-backend-service, so that the operator's choice
//     keeps its backend name whatever the Ingresses say.
//  3. Turn every rule into a server per host (hosts.go) and every path into
//     location blocks (paths.go) routing to a Service port (backends.go);
//     read each host's SSL redirect setting.
//  4. Give servers their certificates (tls.go).
//  5. Choose the default backend.
//  6. Collect the backends that a location or the default names, with their
//     endpoints (endpoints.go), and sort everything.
//
// A broken object never breaks another: a bad host leaves out its rule, a
// bad path or backend leaves out its path, a bad Secret leaves its hosts on
// plain HTTP; each is a Problem naming the object and field and saying what
// to do.
func Build(s *store.Snapshot, o Options) *Model {
	b := &builder{
		s:            s,
		o:            o,
		certs:        o.Certificates,
		servers:      map[string]*server{},
		backends:     map[backendKey]*backend{},
		backendNames: map[string]backendKey{},
	}
	if b.certs == nil {
		b.certs = &CertCache{}
	}
	b.selectIngresses()
	if o.DefaultBackendService != (types.NamespacedName{}) {
		// Resolved first so that it wins a backend name; chosen in step 5.
		b.flagDefault = b.flagDefaultBackend(o.DefaultBackendService)
	}
	for _, ing := range b.ingresses {
		b.addRules(ing)
	}
	b.attachTLS()
	b.chooseDefaultBackend()
	m := b.model()
	if o.Certificates != nil {
		o.Certificates.forget(s.Secrets)
	}
	return m
}

// builder holds the state of one Build.
type builder struct {
	s     *store.Snapshot
	o     Options
	certs *CertCache

	// ingresses are ours, oldest first.
	ingresses []*networking_v1.Ingress
	servers   map[string]*server
	// backends caches every Service port an Ingress named, resolved or not;
	// backendNames maps each given name to its owner.
	backends     map[backendKey]*backend
	backendNames map[string]backendKey
	// flagDefault is --default-backend-service resolved, defaultBackend the
	// chosen default.
	flagDefault    *backend
	defaultBackend *backend
	problems       []Problem

	// Scratch space reused across backends, and one array that holds every
	// endpoint's ForZones.
	sliceNames []string
	candidates []candidate
	zoneNames  []string
}

// server is a Server under construction.
type server struct {
	host   string
	blocks map[block]int // index into claims
	claims []claim
	// last is the last Ingress that added a rule, so that an Ingress with
	// several rules for one host counts once.
	last *networking_v1.Ingress

	tls     *TLS
	tlsFrom types.NamespacedName

	redirectSet  bool
	redirect     bool
	redirectFrom types.NamespacedName
}

// selectIngresses keeps the Ingresses of our class, oldest first.
func (b *builder) selectIngresses() {
	class := newClassifier(b.s.IngressClasses, b.o)
	b.ingresses = make([]*networking_v1.Ingress, 0, len(b.s.Ingresses))
	for _, ing := range b.s.Ingresses {
		ours, missingClass := class.ours(ing)
		if missingClass {
			b.ingressProblem(ing, "spec.ingressClassName",
				"IngressClass %q does not exist, so the Ingress is not served: create it with spec.controller %q",
				b.o.IngressClass, b.o.ControllerClass)
		}
		if ours {
			b.ingresses = append(b.ingresses, ing)
		}
	}
	slices.SortFunc(b.ingresses, func(x, y *networking_v1.Ingress) int {
		if c := x.CreationTimestamp.Time.Compare(y.CreationTimestamp.Time); c != 0 {
			return c
		}
		if c := cmp.Compare(x.Namespace, y.Namespace); c != 0 {
			return c
		}
		return cmp.Compare(x.Name, y.Name)
	})
}

// addRules merges an Ingress's rules into the servers of their hosts.
func (b *builder) addRules(ing *networking_v1.Ingress) {
	redirect, redirectSet := b.sslRedirect(ing)
	for i := range ing.Spec.Rules {
		rule := &ing.Spec.Rules[i]
		if rule.Host != "" {
			if reason := hostError(rule.Host); reason != "" {
				b.ingressProblem(ing, fmt.Sprintf("spec.rules[%d].host", i),
					"host %q %s; the rule is left out: use a lowercase DNS name, optionally starting with \"*.\"",
					rule.Host, reason)
				continue
			}
		}
		srv := b.server(rule.Host)
		if srv.last != ing {
			srv.last = ing
			if redirectSet {
				b.applyRedirect(srv, ing, redirect)
			}
		}
		if rule.HTTP == nil {
			continue
		}
		for j := range rule.HTTP.Paths {
			b.addPath(srv, pathRef{ing: ing, rule: i, path: j}, &rule.HTTP.Paths[j])
		}
	}
}

func (b *builder) server(host string) *server {
	srv := b.servers[host]
	if srv == nil {
		srv = &server{host: host, blocks: map[block]int{}}
		b.servers[host] = srv
	}
	return srv
}

// ingressProblem records a problem with a field of an Ingress. Callers build
// messages only on failure, so the happy path does not format strings.
func (b *builder) ingressProblem(ing *networking_v1.Ingress, field, format string, args ...any) {
	b.problems = append(b.problems, Problem{
		Kind:      "Ingress",
		Namespace: ing.Namespace,
		Name:      ing.Name,
		Field:     field,
		Message:   fmt.Sprintf(format, args...),
	})
}

// model assembles the sorted result.
func (b *builder) model() *Model {
	m := &Model{Servers: make([]Server, 0, len(b.servers))}
	var used []*backend
	use := func(be *backend) {
		if !be.used {
			be.used = true
			used = append(used, be)
		}
	}
	for _, srv := range b.servers {
		out := Server{Host: srv.host, TLS: srv.tls}
		if srv.tls != nil {
			out.SSLRedirect = b.o.SSLRedirect
			if srv.redirectSet {
				out.SSLRedirect = srv.redirect
			}
		}
		out.Locations = make([]Location, len(srv.claims))
		for i := range srv.claims {
			out.Locations[i] = srv.claims[i].loc
			use(srv.claims[i].backend)
		}
		slices.SortFunc(out.Locations, func(x, y Location) int {
			if c := strings.Compare(x.Path, y.Path); c != 0 {
				return c
			}
			switch {
			case x.Exact == y.Exact:
				return 0
			case x.Exact:
				return -1
			}
			return 1
		})
		m.Servers = append(m.Servers, out)
	}
	slices.SortFunc(m.Servers, func(x, y Server) int { return strings.Compare(x.Host, y.Host) })

	if b.defaultBackend != nil {
		m.DefaultBackend = b.defaultBackend.name
		use(b.defaultBackend)
	}
	slices.SortFunc(used, func(x, y *backend) int { return strings.Compare(x.name, y.name) })
	m.Backends = make([]Backend, len(used))
	for i, be := range used {
		b.fillBackend(&m.Backends[i], be)
	}

	slices.SortFunc(b.problems, func(x, y Problem) int {
		return cmp.Or(
			strings.Compare(x.Kind, y.Kind),
			strings.Compare(x.Namespace, y.Namespace),
			strings.Compare(x.Name, y.Name),
			strings.Compare(x.Field, y.Field),
			strings.Compare(x.Message, y.Message),
		)
	})
	m.Problems = b.problems
	return m
}

// fillBackend describes be from its Service and EndpointSlices.
func (b *builder) fillBackend(out *Backend, be *backend) {
	svc := be.service
	out.Name = be.name
	out.Service = be.key.service
	out.Port = be.key.portString()
	out.ZoneMode = svc.Annotations[AnnotationZoneMode]
	if td := svc.Spec.TrafficDistribution; td != nil {
		out.TrafficDistribution = *td
	}
	// The current annotation, else the one it replaced.
	out.TopologyMode = svc.Annotations[core_v1.AnnotationTopologyMode]
	if out.TopologyMode == "" {
		out.TopologyMode = svc.Annotations[core_v1.DeprecatedAnnotationTopologyAwareHints]
	}
	out.portName = be.port.Name
	out.Endpoints = b.endpoints(be)
}
