package debug

import (
	"net/netip"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/controller/live"
	"github.com/zonal-ingress/zonal/controller/model"
	"github.com/zonal-ingress/zonal/controller/zone"
)

// The JSON shapes of the answers. They are views, not the model's own
// types: what a user debugging routing needs, in stable camelCase names,
// and nothing secret (a certificate appears as its Secret's name).

// backendListView is /debug/backends.
type backendListView struct {
	// OwnZone is the zone the decisions were taken for ("" unknown), and
	// DefaultZoneMode is --zone-mode.
	OwnZone         string `json:"ownZone"`
	DefaultZoneMode string `json:"defaultZoneMode"`
	// Generation is the endpoint table generation last published.
	Generation uint64 `json:"generation"`
	// Backends are backendSummary values, or backendDetail with ?peers.
	Backends []any `json:"backends"`
}

// backendSummary is one backend and its zone decision.
type backendSummary struct {
	Name    string `json:"name"`
	Service string `json:"service"` // namespace/name
	Port    string `json:"port"`
	// ZoneMode is the mode in effect (annotation over --zone-mode, auto
	// resolved); Fallback why it prefers no peer, "" when it does.
	ZoneMode       string         `json:"zoneMode"`
	Fallback       string         `json:"fallback"`
	PeerCount      int            `json:"peerCount"`
	PeersByZone    map[string]int `json:"peersByZone"` // "" for peers without a zone
	PreferredCount int            `json:"preferredCount"`
	LocalShare     share          `json:"localShare"`
	// Spill weighs the other zones for the requests that leave the
	// preferred set (basis points); absent: by their peers.
	Spill map[string]uint32 `json:"spill,omitempty"`
}

// share is a fraction of requests, in basis points and as a number.
type share struct {
	BasisPoints uint32  `json:"basisPoints"`
	Fraction    float64 `json:"fraction"`
}

// backendDetail is /debug/backends/{name}.
type backendDetail struct {
	backendSummary
	OwnZone  string       `json:"ownZone"`
	Topology topologyView `json:"topology"`
	// DefaultBackend is set when unmatched requests go to this backend.
	DefaultBackend bool       `json:"defaultBackend"`
	Ingresses      []string   `json:"ingresses"` // namespace/name, sorted
	Locations      []useView  `json:"locations"`
	Peers          []peerView `json:"peers"`
}

// topologyView is what the Service asks of the zone policy.
type topologyView struct {
	ZoneModeAnnotation  string `json:"zoneModeAnnotation,omitempty"`
	TrafficDistribution string `json:"trafficDistribution,omitempty"`
	TopologyMode        string `json:"topologyMode,omitempty"`
}

// useView is one location that proxies to a backend.
type useView struct {
	Host     string `json:"host"`
	Path     string `json:"path"`
	Exact    bool   `json:"exact"`
	PathType string `json:"pathType"`
	Ingress  string `json:"ingress"`
}

// peerView is one endpoint of a backend as the table carries it.
type peerView struct {
	Address     netip.Addr `json:"address"`
	Port        uint16     `json:"port"`
	Zone        string     `json:"zone"`
	Node        string     `json:"node,omitempty"`
	Weight      uint32     `json:"weight"`
	Ready       bool       `json:"ready"`
	Serving     bool       `json:"serving"`
	Terminating bool       `json:"terminating"`
	Preferred   bool       `json:"preferred"`
	ForZones    []string   `json:"forZones,omitempty"`
}

func backendList(snap live.Snapshot, peers bool) backendListView {
	m := snap.Last.Model
	v := backendListView{
		OwnZone:         snap.Policy.Zone,
		DefaultZoneMode: string(snap.Policy.Mode),
		Generation:      snap.Published,
		Backends:        make([]any, len(m.Backends)),
	}
	for i := range m.Backends {
		if peers {
			v.Backends[i] = backendDetailOf(snap, i)
		} else {
			v.Backends[i] = summaryOf(&m.Backends[i], decisionOf(snap, i))
		}
	}
	return v
}

// decisionOf is the decision of the i-th backend of the last pass.
func decisionOf(snap live.Snapshot, i int) zone.Decision {
	if i < len(snap.Last.Decisions) {
		return snap.Last.Decisions[i]
	}
	return zone.Decision{}
}

func summaryOf(b *model.Backend, d zone.Decision) backendSummary {
	s := backendSummary{
		Name:        b.Name,
		Service:     b.Service.String(),
		Port:        b.Port,
		ZoneMode:    string(d.Mode),
		Fallback:    d.Fallback,
		PeerCount:   len(b.Endpoints),
		PeersByZone: map[string]int{},
		LocalShare:  shareOf(d.LocalShare),
		Spill:       d.Spill,
	}
	for j := range b.Endpoints {
		s.PeersByZone[b.Endpoints[j].Zone]++
		if preferred(d, j) {
			s.PreferredCount++
		}
	}
	return s
}

func backendDetailOf(snap live.Snapshot, i int) backendDetail {
	m := snap.Last.Model
	b := &m.Backends[i]
	d := decisionOf(snap, i)
	v := backendDetail{
		backendSummary: summaryOf(b, d),
		OwnZone:        snap.Policy.Zone,
		Topology: topologyView{
			ZoneModeAnnotation:  b.ZoneMode,
			TrafficDistribution: b.TrafficDistribution,
			TopologyMode:        b.TopologyMode,
		},
		DefaultBackend: m.DefaultBackend == b.Name,
		Ingresses:      []string{},
		Locations:      []useView{},
		Peers:          make([]peerView, len(b.Endpoints)),
	}
	for _, srv := range m.Servers {
		for _, loc := range srv.Locations {
			if loc.Backend != b.Name {
				continue
			}
			ing := nsName(loc.Ingress)
			v.Locations = append(v.Locations, useView{
				Host: srv.Host, Path: loc.Path, Exact: loc.Exact, PathType: loc.PathType, Ingress: ing,
			})
			if ing != "" && !slices.Contains(v.Ingresses, ing) {
				v.Ingresses = append(v.Ingresses, ing)
			}
		}
	}
	slices.Sort(v.Ingresses)
	for j := range b.Endpoints {
		e := &b.Endpoints[j]
		v.Peers[j] = peerView{
			Address: e.Address, Port: e.Port, Zone: e.Zone, Node: e.NodeName,
			// The controller gives every peer the same weight.
			Weight: 1,
			Ready:  e.Ready, Serving: e.Serving, Terminating: e.Terminating,
			Preferred: preferred(d, j),
			ForZones:  e.ForZones,
		}
	}
	return v
}

func preferred(d zone.Decision, j int) bool { return j < len(d.Preferred) && d.Preferred[j] }

func shareOf(bp uint32) share {
	return share{BasisPoints: bp, Fraction: float64(bp) / zone.ShareOne}
}

// modelView is /debug/model: the model of the last pass with the pass's
// outcome.
type modelView struct {
	Servers        []serverView   `json:"servers"`
	DefaultBackend string         `json:"defaultBackend"`
	Backends       []modelBackend `json:"backends"`
	Problems       []problemView  `json:"problems"`
	LastPass       passView       `json:"lastPass"`
}

type serverView struct {
	Host string `json:"host"`
	// TLS names the Secret of the certificate; the certificate and its
	// key never leave the controller.
	TLS         *tlsView       `json:"tls,omitempty"`
	SSLRedirect bool           `json:"sslRedirect"`
	Locations   []locationView `json:"locations"`
}

type tlsView struct {
	Secret string `json:"secret"` // namespace/name
}

type locationView struct {
	Path     string `json:"path"`
	Exact    bool   `json:"exact"`
	PathType string `json:"pathType"`
	Backend  string `json:"backend"`
	Ingress  string `json:"ingress"`
}

type modelBackend struct {
	Name      string         `json:"name"`
	Service   string         `json:"service"`
	Port      string         `json:"port"`
	Topology  topologyView   `json:"topology"`
	Endpoints []endpointView `json:"endpoints"`
}

type endpointView struct {
	Address     netip.Addr `json:"address"`
	Port        uint16     `json:"port"`
	Zone        string     `json:"zone"`
	Node        string     `json:"node,omitempty"`
	Ready       bool       `json:"ready"`
	Serving     bool       `json:"serving"`
	Terminating bool       `json:"terminating"`
	ForZones    []string   `json:"forZones,omitempty"`
}

type problemView struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Field     string `json:"field,omitempty"`
	Message   string `json:"message"`
}

// passView is the outcome of the last sync pass.
type passView struct {
	Passes       uint64    `json:"passes"`
	At           time.Time `json:"at"`
	Took         string    `json:"took"`
	Published    bool      `json:"published"`
	Reloaded     bool      `json:"reloaded"`
	Deferred     string    `json:"deferred,omitempty"`
	RenderError  string    `json:"renderError,omitempty"`
	ReloadError  string    `json:"reloadError,omitempty"`
	PublishError string    `json:"publishError,omitempty"`
}

func modelViewOf(snap live.Snapshot) modelView {
	m := snap.Last.Model
	v := modelView{
		Servers:        make([]serverView, len(m.Servers)),
		DefaultBackend: m.DefaultBackend,
		Backends:       make([]modelBackend, len(m.Backends)),
		Problems:       make([]problemView, len(m.Problems)),
		LastPass:       passViewOf(snap),
	}
	for i, srv := range m.Servers {
		sv := serverView{Host: srv.Host, SSLRedirect: srv.SSLRedirect, Locations: make([]locationView, len(srv.Locations))}
		if srv.TLS != nil {
			sv.TLS = &tlsView{Secret: srv.TLS.Secret.String()}
		}
		for j, loc := range srv.Locations {
			sv.Locations[j] = locationView{
				Path: loc.Path, Exact: loc.Exact, PathType: loc.PathType,
				Backend: loc.Backend, Ingress: nsName(loc.Ingress),
			}
		}
		v.Servers[i] = sv
	}
	for i := range m.Backends {
		b := &m.Backends[i]
		mb := modelBackend{
			Name: b.Name, Service: b.Service.String(), Port: b.Port,
			Topology: topologyView{
				ZoneModeAnnotation:  b.ZoneMode,
				TrafficDistribution: b.TrafficDistribution,
				TopologyMode:        b.TopologyMode,
			},
			Endpoints: make([]endpointView, len(b.Endpoints)),
		}
		for j, e := range b.Endpoints {
			mb.Endpoints[j] = endpointView{
				Address: e.Address, Port: e.Port, Zone: e.Zone, Node: e.NodeName,
				Ready: e.Ready, Serving: e.Serving, Terminating: e.Terminating, ForZones: e.ForZones,
			}
		}
		v.Backends[i] = mb
	}
	for i, p := range m.Problems {
		v.Problems[i] = problemView{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, Field: p.Field, Message: p.Message}
	}
	return v
}

func passViewOf(snap live.Snapshot) passView {
	r := snap.Last
	v := passView{
		Passes: snap.Passes, At: snap.LastAt, Took: r.Took.String(),
		Published: r.Published != nil, Reloaded: r.Reloaded,
		RenderError: errString(r.RenderErr), ReloadError: errString(r.ReloadErr), PublishError: errString(r.PublishErr),
	}
	if r.Deferred > 0 {
		v.Deferred = r.Deferred.String()
	}
	return v
}

// nsName is namespace/name, or "" for the zero name (a location of the
// default backend service has no Ingress).
func nsName(n types.NamespacedName) string {
	if n.Name == "" {
		return ""
	}
	return n.String()
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
