package model

import (
	"strconv"
	"strings"

	core_v1 "k8s.io/api/core/v1"
	networking_v1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
)

// backendKey is a Service port as an Ingress writes it: by number or by name.
type backendKey struct {
	service types.NamespacedName
	number  int32
	name    string
}

// backend is a resolved Service port, or the reason it could not be
// resolved (kept so that every path naming it gets its own problem without
// a second lookup).
type backend struct {
	name    string // <namespace>-<service>-<port>
	key     backendKey
	service *core_v1.Service
	port    *core_v1.ServicePort

	// For a backend that could not be resolved: the field suffix
	// (".service.name", ".service.port"), what is wrong and how to fix it.
	failField  string
	failReason string
	failFix    string

	// used is set once a location or the default names the backend.
	used bool
}

// portString is the port as the Ingress writes it.
func (k backendKey) portString() string {
	if k.name != "" {
		return k.name
	}
	return strconv.Itoa(int(k.number))
}

// resolve finds the Service port an Ingress backend names. On failure it
// records a problem at field(suffix), saying that what ("the path", "the
// default backend") is left out, and returns nil.
//
// ingress-nginx keeps such a path and answers 503 for it. zonal leaves it
// out instead, so that a shorter path of the same host, or the default
// backend, still serves those requests; the problem says why.
func (b *builder) resolve(ing *networking_v1.Ingress, ib *networking_v1.IngressBackend, what string, field func(suffix string) string) *backend {
	if ib.Resource != nil {
		b.ingressProblem(ing, field(".resource"),
			"resource backends (%s %s) are not supported; %s is left out: use a service backend",
			ib.Resource.Kind, ib.Resource.Name, what)
		return nil
	}
	sb := ib.Service
	if sb == nil || sb.Name == "" {
		b.ingressProblem(ing, field(".service.name"),
			"the backend names no Service; %s is left out: set service.name", what)
		return nil
	}
	if sb.Port.Number == 0 && sb.Port.Name == "" {
		b.ingressProblem(ing, field(".service.port"),
			"the backend for Service %s/%s names no port; %s is left out: set port.number or port.name",
			ing.Namespace, sb.Name, what)
		return nil
	}
	key := backendKey{
		service: types.NamespacedName{Namespace: ing.Namespace, Name: sb.Name},
		number:  sb.Port.Number,
		name:    sb.Port.Name,
	}
	be := b.backend(key)
	if be.failReason != "" {
		b.problems = append(b.problems, Problem{
			Kind: "Ingress", Namespace: ing.Namespace, Name: ing.Name,
			Field:   field(be.failField),
			Message: be.failReason + "; " + what + " is left out: " + be.failFix,
		})
		return nil
	}
	return be
}

// backend returns the cached resolution of key, resolving it on first use.
func (b *builder) backend(key backendKey) *backend {
	if be, ok := b.backends[key]; ok {
		return be
	}
	be := &backend{key: key}
	b.backends[key] = be
	svc := b.s.Services[key.service]
	switch {
	case svc == nil:
		be.failField = ".service.name"
		be.failReason = "Service " + key.service.String() + " does not exist"
		be.failFix = "create the Service or fix service.name"
		return be
	case svc.Spec.Type == core_v1.ServiceTypeExternalName:
		be.failField = ".service.name"
		be.failReason = "Service " + key.service.String() + " is of type ExternalName, which zonal does not support"
		be.failFix = "use a Service with a selector or with EndpointSlices of its own"
		return be
	}
	for i := range svc.Spec.Ports {
		sp := &svc.Spec.Ports[i]
		if (key.name != "" && sp.Name == key.name) || (key.name == "" && sp.Port == key.number) {
			be.service, be.port = svc, sp
			break
		}
	}
	if be.port == nil {
		be.failField = ".service.port"
		be.failReason = "Service " + key.service.String() + " has no port " + strconv.Quote(key.portString()) +
			" (it has " + servicePorts(svc) + ")"
		be.failFix = "name one of its ports in service.port"
		return be
	}
	be.name = key.service.Namespace + "-" + key.service.Name + "-" + key.portString()
	// The name joins parts that may themselves hold '-', so two Service
	// ports can share one (namespace a, Service b-c; namespace a-b, Service
	// c). The endpoint table knows backends by name only, so the first to
	// claim a name keeps it.
	if other, ok := b.backendNames[be.name]; ok && other != key {
		be.failField = ".service.name"
		be.failReason = "backend name " + be.name + " of Service " + key.service.String() + " port " + key.portString() +
			" is already the name of Service " + other.service.String() + " port " + other.portString()
		be.failFix = "rename one of the Services"
		be.name, be.service, be.port = "", nil, nil
		return be
	}
	b.backendNames[be.name] = key
	return be
}

// servicePorts lists a Service's ports for a problem message.
func servicePorts(svc *core_v1.Service) string {
	if len(svc.Spec.Ports) == 0 {
		return "no ports"
	}
	var sb strings.Builder
	sb.WriteString("ports ")
	for i, p := range svc.Spec.Ports {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(strconv.Itoa(int(p.Port)))
		if p.Name != "" {
			sb.WriteString(" (" + p.Name + ")")
		}
	}
	return sb.String()
}

// chooseDefaultBackend picks the backend for requests no location matches:
// --default-backend-service (its first port) if set and usable, else the
// oldest Ingress with a usable spec.defaultBackend. A flag naming a missing
// Service is a problem but does not leave the cluster without a default: the
// Ingresses' default backend still applies.
func (b *builder) chooseDefaultBackend() {
	var from string // what chose the default, for problems
	if b.flagDefault != nil {
		b.defaultBackend = b.flagDefault
		from = "--default-backend-service"
	}
	for _, ing := range b.ingresses {
		if ing.Spec.DefaultBackend == nil {
			continue
		}
		be := b.resolve(ing, ing.Spec.DefaultBackend, "the default backend", func(suffix string) string { return "spec.defaultBackend" + suffix })
		switch {
		case be == nil:
		case b.defaultBackend == nil:
			b.defaultBackend = be
			from = "Ingress " + ing.Namespace + "/" + ing.Name + ", which is older"
		case be != b.defaultBackend:
			b.ingressProblem(ing, "spec.defaultBackend",
				"the default backend is already %s, set by %s; this one is ignored: remove it or route with a rule instead",
				b.defaultBackend.name, from)
		}
	}
}

// flagDefaultBackend resolves --default-backend-service, nil with a problem
// if it cannot.
func (b *builder) flagDefaultBackend(svcKey types.NamespacedName) *backend {
	problem := func(msg string) *backend {
		b.problems = append(b.problems, Problem{
			Kind: "Service", Namespace: svcKey.Namespace, Name: svcKey.Name, Message: msg,
		})
		return nil
	}
	svc := b.s.Services[svcKey]
	switch {
	case svc == nil:
		return problem("--default-backend-service names Service " + svcKey.String() +
			", which does not exist: create it or change the flag")
	case len(svc.Spec.Ports) == 0:
		return problem("--default-backend-service names Service " + svcKey.String() +
			", which has no ports: give it a port or change the flag")
	}
	be := b.backend(backendKey{service: svcKey, number: svc.Spec.Ports[0].Port})
	if be.failReason != "" {
		return problem("--default-backend-service: " + be.failReason + ": fix the Service or change the flag")
	}
	return be
}
