package debug

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
	"github.com/valyala/fasthttp/fasthttputil"
	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/controller/live"
	"github.com/zonal-ingress/zonal/controller/loop"
	"github.com/zonal-ingress/zonal/controller/model"
	"github.com/zonal-ingress/zonal/controller/zone"
)

// Key material of the fixture's TLS server: none of it may show up in
// any answer.
const (
	fixtureKey  = "-----BEGIN EC PRIVATE KEY-----\nc2VjcmV0LWtleS1tYXRlcmlhbC1kby1ub3QtbGVhaw==\n-----END EC PRIVATE KEY-----\n"
	fixtureCert = "-----BEGIN CERTIFICATE-----\nY2VydGlmaWNhdGUtYnl0ZXM=\n-----END CERTIFICATE-----\n"
)

// fixture is a shop in zone-a, mode local: web has two peers in zone-a
// and one in zone-b (two preferred), api has its only peer in zone-b (it
// falls back to all peers), and web is also the default backend.
func fixture() *model.Model {
	ep := func(addr, zone string, ready bool) model.Endpoint {
		return model.Endpoint{
			Address: netip.MustParseAddr(addr), Port: 8080, Zone: zone, NodeName: "node-" + zone,
			Ready: ready, Serving: ready, Terminating: !ready,
		}
	}
	shop := types.NamespacedName{Namespace: "shop", Name: "shop"}
	legacy := types.NamespacedName{Namespace: "shop", Name: "legacy"}
	return &model.Model{
		Servers: []model.Server{
			{
				Host: "shop.test",
				TLS: &model.TLS{
					Secret: types.NamespacedName{Namespace: "shop", Name: "shop-tls"},
					Cert:   []byte(fixtureCert), Key: []byte(fixtureKey),
				},
				Locations: []model.Location{
					{Exact: true, Path: "/", Backend: "shop-web-80", Ingress: shop, PathType: "Prefix"},
					{Path: "/", Backend: "shop-web-80", Ingress: shop, PathType: "Prefix"},
					{Path: "/api/", Backend: "shop-api-http", Ingress: shop, PathType: "Prefix"},
				},
			},
			{
				Host: "old.test",
				Locations: []model.Location{
					{Path: "/", Backend: "shop-web-80", Ingress: legacy, PathType: "ImplementationSpecific"},
				},
			},
		},
		DefaultBackend: "shop-web-80",
		Backends: []model.Backend{
			{
				Name: "shop-api-http", Service: types.NamespacedName{Namespace: "shop", Name: "api"}, Port: "http",
				Endpoints: []model.Endpoint{ep("10.0.2.1", "zone-b", true)},
			},
			{
				Name: "shop-web-80", Service: types.NamespacedName{Namespace: "shop", Name: "web"}, Port: "80",
				ZoneMode: "local",
				Endpoints: []model.Endpoint{
					ep("10.0.1.1", "zone-a", true), ep("10.0.1.2", "zone-a", true),
					ep("10.0.1.3", "zone-a", false), ep("10.0.2.2", "zone-b", true),
				},
			},
		},
		Problems: []model.Problem{{Kind: "Ingress", Namespace: "shop", Name: "broken", Field: "spec.rules[0].host", Message: "not a valid host"}},
	}
}

// fakeNGINX is a running NGINX with a given master pid.
type fakeNGINX struct{ pid int }

func (f fakeNGINX) MasterPID() int   { return f.pid }
func (f fakeNGINX) Reloads() uint64  { return 3 }
func (f fakeNGINX) Restarts() uint64 { return 1 }

// started is the state of a controller that runs: the fixture passed, its
// table published into a temporary directory, NGINX with pid (this
// process, by default) and a configuration file.
type started struct {
	state    *live.State
	dir      string
	conf     string
	confText string
	gen      uint64
}

func startedState(t *testing.T) *started {
	t.Helper()
	dir := t.TempDir()
	m := fixture()
	policy := zone.Policy{Zone: "zone-a", Mode: zone.ModeOff}
	tbl, decisions := zone.Table(m, policy)
	pub, err := table.OpenPublisher(filepath.Join(dir, "table"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pub.Close() })
	published, err := pub.Publish(tbl)
	if err != nil {
		t.Fatal(err)
	}
	s := &started{state: &live.State{}, dir: dir, conf: filepath.Join(dir, "nginx.conf"), gen: published.Generation}
	s.confText = "events {}\nhttp { zonal_table " + pub.Dir() + "; }\n"
	if err := os.WriteFile(s.conf, []byte(s.confText), 0o644); err != nil {
		t.Fatal(err)
	}
	s.state.Synced()
	s.state.Pass(loop.Result{Model: m, Decisions: decisions, Policy: policy, Published: &published, Reloaded: true})
	s.state.Started(fakeNGINX{pid: os.Getpid()}, pub.Dir(), s.conf)
	return s
}

// reply is one answer of the endpoint.
type reply struct {
	status      int
	contentType string
	header      *fasthttp.ResponseHeader
	body        []byte
}

func (r reply) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("answer is not a JSON object: %v\n%s", err, r.body)
	}
	return v
}

// serve runs a Server on state over an in-memory listener until the test
// ends, and returns a function that sends a request.
func serve(t *testing.T, state *live.State) func(method, path string) reply {
	t.Helper()
	ln := fasthttputil.NewInmemoryListener()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Server{State: state}).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return after its context ended")
		}
	})
	client := &fasthttp.HostClient{Addr: "debug", Dial: func(string) (net.Conn, error) { return ln.Dial() }}
	return func(method, path string) reply {
		t.Helper()
		req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
		defer fasthttp.ReleaseRequest(req)
		defer fasthttp.ReleaseResponse(resp)
		req.Header.SetMethod(method)
		req.SetRequestURI("http://debug" + path)
		if err := client.DoTimeout(req, resp, 10*time.Second); err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		h := &fasthttp.ResponseHeader{}
		resp.Header.CopyTo(h)
		return reply{
			status: resp.StatusCode(), contentType: string(resp.Header.ContentType()),
			header: h, body: slices.Clone(resp.Body()),
		}
	}
}

// get decodes the JSON answer of GET path into v after checking its
// status and content type.
func get(t *testing.T, do func(string, string) reply, path string, status int, v any) reply {
	t.Helper()
	r := do("GET", path)
	if r.status != status {
		t.Fatalf("GET %s: status %d, want %d; body:\n%s", path, r.status, status, r.body)
	}
	if r.contentType != "application/json" {
		t.Fatalf("GET %s: Content-Type %q, want application/json", path, r.contentType)
	}
	if v != nil {
		if err := json.Unmarshal(r.body, v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, r.body)
		}
	}
	return r
}

func TestBackends(t *testing.T) {
	t.Parallel()
	s := startedState(t)
	do := serve(t, s.state)
	var list struct {
		OwnZone         string           `json:"ownZone"`
		DefaultZoneMode string           `json:"defaultZoneMode"`
		Generation      uint64           `json:"generation"`
		Backends        []backendSummary `json:"backends"`
	}
	get(t, do, "/debug/backends", 200, &list)
	if list.OwnZone != "zone-a" || list.DefaultZoneMode != "off" || list.Generation != s.gen {
		t.Errorf("ownZone %q, defaultZoneMode %q, generation %d; want zone-a, off, %d", list.OwnZone, list.DefaultZoneMode, list.Generation, s.gen)
	}
	want := []backendSummary{
		{
			Name: "shop-api-http", Service: "shop/api", Port: "http", ZoneMode: "off",
			PeerCount: 1, PeersByZone: map[string]int{"zone-b": 1},
		},
		{
			Name: "shop-web-80", Service: "shop/web", Port: "80", ZoneMode: "local",
			PeerCount: 4, PeersByZone: map[string]int{"zone-a": 3, "zone-b": 1}, PreferredCount: 2,
			LocalShare: share{BasisPoints: 10000, Fraction: 1},
		},
	}
	if len(list.Backends) != len(want) {
		t.Fatalf("%d backends, want %d", len(list.Backends), len(want))
	}
	for i := range want {
		got, _ := json.Marshal(list.Backends[i])
		exp, _ := json.Marshal(want[i])
		if string(got) != string(exp) {
			t.Errorf("backend %d:\n got %s\nwant %s", i, got, exp)
		}
	}

	// ?peers=true gives every backend in detail.
	var all struct {
		Backends []backendDetail `json:"backends"`
	}
	get(t, do, "/debug/backends?peers=true", 200, &all)
	if len(all.Backends) != 2 || len(all.Backends[1].Peers) != 4 || all.Backends[1].Name != "shop-web-80" {
		t.Errorf("?peers=true: %+v, want both backends with their peers", all.Backends)
	}
}

func TestBackendFallback(t *testing.T) {
	t.Parallel()
	// The own zone unknown: local mode falls back to all peers, and says so.
	state := &live.State{}
	m := fixture()
	policy := zone.Policy{Mode: zone.ModeLocal}
	_, decisions := zone.Table(m, policy)
	state.Pass(loop.Result{Model: m, Decisions: decisions, Policy: policy})
	do := serve(t, state)
	var b backendDetail
	get(t, do, "/debug/backends/shop-api-http", 200, &b)
	if b.ZoneMode != "local" || b.Fallback != zone.FallbackNoZone || b.PreferredCount != 0 || b.LocalShare.BasisPoints != 0 {
		t.Errorf("zoneMode %q, fallback %q, preferred %d, local share %v; want local, %q, 0, 0",
			b.ZoneMode, b.Fallback, b.PreferredCount, b.LocalShare, zone.FallbackNoZone)
	}
}

func TestBackend(t *testing.T) {
	t.Parallel()
	s := startedState(t)
	do := serve(t, s.state)
	var b backendDetail
	get(t, do, "/debug/backends/shop-web-80", 200, &b)
	if b.Name != "shop-web-80" || b.Service != "shop/web" || b.ZoneMode != "local" || b.Fallback != "" || b.OwnZone != "zone-a" {
		t.Errorf("got %+v", b.backendSummary)
	}
	if b.Topology.ZoneModeAnnotation != "local" {
		t.Errorf("topology %+v, want the zone-mode annotation local", b.Topology)
	}
	if !b.DefaultBackend {
		t.Error("defaultBackend false, want true")
	}
	if want := []string{"shop/legacy", "shop/shop"}; !slices.Equal(b.Ingresses, want) {
		t.Errorf("ingresses %v, want %v (each once)", b.Ingresses, want)
	}
	if len(b.Locations) != 3 || b.Locations[2].Host != "old.test" || b.Locations[0].Host != "shop.test" || !b.Locations[0].Exact {
		t.Errorf("locations %+v, want shop.test = /, shop.test /, old.test /", b.Locations)
	}
	wantPeers := []peerView{
		{Address: netip.MustParseAddr("10.0.1.1"), Port: 8080, Zone: "zone-a", Node: "node-zone-a", Weight: 1, Ready: true, Serving: true, Preferred: true},
		{Address: netip.MustParseAddr("10.0.1.2"), Port: 8080, Zone: "zone-a", Node: "node-zone-a", Weight: 1, Ready: true, Serving: true, Preferred: true},
		{Address: netip.MustParseAddr("10.0.1.3"), Port: 8080, Zone: "zone-a", Node: "node-zone-a", Weight: 1, Terminating: true},
		{Address: netip.MustParseAddr("10.0.2.2"), Port: 8080, Zone: "zone-b", Node: "node-zone-b", Weight: 1, Ready: true, Serving: true},
	}
	if len(b.Peers) != len(wantPeers) {
		t.Fatalf("peers %+v, want %+v", b.Peers, wantPeers)
	}
	for i := range wantPeers {
		if !equalPeer(b.Peers[i], wantPeers[i]) {
			t.Errorf("peer %d: %+v, want %+v", i, b.Peers[i], wantPeers[i])
		}
	}

	// The answer's field names, as `zonal dbg --query` users write them.
	raw := do("GET", "/debug/backends/shop-web-80").json(t)
	for _, key := range []string{"name", "service", "port", "zoneMode", "fallback", "peersByZone", "preferredCount", "localShare", "ingresses", "defaultBackend", "peers"} {
		if _, ok := raw[key]; !ok {
			t.Errorf("no %q in %v", key, raw)
		}
	}
}

func equalPeer(a, b peerView) bool {
	return a.Address == b.Address && a.Port == b.Port && a.Zone == b.Zone && a.Node == b.Node && a.Weight == b.Weight &&
		a.Ready == b.Ready && a.Serving == b.Serving && a.Terminating == b.Terminating && a.Preferred == b.Preferred &&
		slices.Equal(a.ForZones, b.ForZones)
}

func TestTable(t *testing.T) {
	t.Parallel()
	s := startedState(t)
	do := serve(t, s.state)
	var live table.Live
	get(t, do, "/debug/table", 200, &live)
	if live.Control != s.gen || live.Snapshot == nil || live.Snapshot.Generation != s.gen || live.Snapshot.Zone != "zone-a" || live.Snapshot.Size == 0 {
		t.Fatalf("table %+v, want control and snapshot generation %d for zone-a", live, s.gen)
	}
	web := live.Snapshot.Backends[1]
	if web.Name != "shop-web-80" || web.LocalShare != table.ShareOne || len(web.Peers) != 4 {
		t.Fatalf("backend %+v, want shop-web-80 with a local share of 100 %% and 4 peers", web)
	}
	// The reader's order: the preferred set first.
	if !web.Peers[0].Preferred || !web.Peers[1].Preferred || web.Peers[2].Preferred || web.Peers[3].Preferred {
		t.Errorf("peers %+v, want the two preferred first", web.Peers)
	}
}

func TestNoTable(t *testing.T) {
	t.Parallel()
	cases := map[string]func(*started){
		"NGINX not started": func(s *started) { s.state.Started(nil, "", "") },
		"table missing": func(s *started) {
			s.state.Started(fakeNGINX{pid: os.Getpid()}, filepath.Join(s.dir, "missing"), s.conf)
		},
		"table damaged": func(s *started) {
			if err := os.WriteFile(filepath.Join(s.dir, "table", table.TableFile), []byte("not a table"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, damage := range cases {
		t.Run(name, func(t *testing.T) {
			s := startedState(t)
			damage(s)
			do := serve(t, s.state)
			var e errorBody
			get(t, do, "/debug/table", 503, &e)
			if e.Error == "" {
				t.Error("no error message")
			}
			t.Log(e.Error)
		})
	}
}

func TestConfig(t *testing.T) {
	t.Parallel()
	s := startedState(t)
	do := serve(t, s.state)
	r := do("GET", "/debug/config")
	if r.status != 200 || !strings.HasPrefix(r.contentType, "text/plain") || string(r.body) != s.confText {
		t.Errorf("GET /debug/config: %d %q %q, want 200 text/plain %q", r.status, r.contentType, r.body, s.confText)
	}

	s.state.Started(fakeNGINX{pid: os.Getpid()}, s.dir, "")
	get(t, do, "/debug/config", 503, nil)
	s.state.Started(fakeNGINX{pid: os.Getpid()}, s.dir, filepath.Join(s.dir, "missing.conf"))
	get(t, do, "/debug/config", 503, nil)
}

func TestModel(t *testing.T) {
	t.Parallel()
	s := startedState(t)
	do := serve(t, s.state)
	var m modelView
	r := get(t, do, "/debug/model", 200, &m)
	if len(m.Servers) != 2 || m.Servers[0].TLS == nil || m.Servers[0].TLS.Secret != "shop/shop-tls" || m.Servers[1].TLS != nil {
		t.Errorf("servers %+v, want shop.test with the Secret shop/shop-tls, old.test without TLS", m.Servers)
	}
	if m.DefaultBackend != "shop-web-80" || len(m.Backends) != 2 || len(m.Backends[1].Endpoints) != 4 {
		t.Errorf("default backend %q, backends %+v", m.DefaultBackend, m.Backends)
	}
	if len(m.Problems) != 1 || m.Problems[0].Field != "spec.rules[0].host" {
		t.Errorf("problems %+v", m.Problems)
	}
	if m.LastPass.Passes != 1 || !m.LastPass.Published || !m.LastPass.Reloaded {
		t.Errorf("last pass %+v, want pass 1, published and reloaded", m.LastPass)
	}
	noKeyMaterial(t, r.body)
}

// noKeyMaterial fails if body holds any part of the fixture's certificate
// or key, in PEM or base64.
func noKeyMaterial(t *testing.T, body []byte) {
	t.Helper()
	leaks := []string{"PRIVATE KEY", "CERTIFICATE", "c2VjcmV0LWtleS1tYXRlcmlhbC1kby1ub3QtbGVhaw", "Y2VydGlmaWNhdGUtYnl0ZXM",
		base64.StdEncoding.EncodeToString([]byte(fixtureKey))[:40], base64.StdEncoding.EncodeToString([]byte(fixtureCert))[:40]}
	for _, leak := range leaks {
		if strings.Contains(string(body), leak) {
			t.Errorf("the answer contains %q:\n%s", leak, body)
		}
	}
}

func TestNoKeyMaterialAnywhere(t *testing.T) {
	t.Parallel()
	s := startedState(t)
	do := serve(t, s.state)
	for _, path := range append(Routes, "/debug/backends/shop-web-80", "/debug/backends?peers=true") {
		noKeyMaterial(t, do("GET", path).body)
	}
}

func TestHealth(t *testing.T) {
	t.Parallel()
	// A pid that surely ended: a child this test started and reaped.
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	gone := cmd.Process.Pid

	cases := map[string]struct {
		state      func(t *testing.T) *live.State
		healthz    int
		readyz     int
		reasonLike string
	}{
		"running": {
			state:   func(t *testing.T) *live.State { return startedState(t).state },
			healthz: 200, readyz: 200,
		},
		"starting": {
			state:   func(*testing.T) *live.State { return &live.State{} },
			healthz: 503, readyz: 503, reasonLike: "no sync pass",
		},
		"first pass, NGINX not started": {
			state: func(*testing.T) *live.State {
				st := &live.State{}
				st.Synced()
				st.Pass(loop.Result{Model: fixture()})
				return st
			},
			healthz: 503, readyz: 503, reasonLike: "NGINX has not started",
		},
		"master being restarted": {
			state: func(t *testing.T) *live.State {
				s := startedState(t)
				s.state.Started(fakeNGINX{pid: 0}, s.dir, s.conf)
				return s.state
			},
			healthz: 503, readyz: 503, reasonLike: "restarting",
		},
		"master gone": {
			state: func(t *testing.T) *live.State {
				s := startedState(t)
				s.state.Started(fakeNGINX{pid: gone}, s.dir, s.conf)
				return s.state
			},
			healthz: 503, readyz: 200, reasonLike: "is gone",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			do := serve(t, tc.state(t))
			var h healthView
			get(t, do, "/healthz", tc.healthz, &h)
			if (tc.healthz == 200) != (h.Status == "ok") || !strings.Contains(h.Error, tc.reasonLike) {
				t.Errorf("healthz %+v, want status for %d and an error like %q", h, tc.healthz, tc.reasonLike)
			}
			var rd readyView
			get(t, do, "/readyz", tc.readyz, &rd)
			if (tc.readyz == 200) != (rd.Status == "ready" && rd.Error == "") {
				t.Errorf("readyz %+v, want %d", rd, tc.readyz)
			}
			if h.Ready != (tc.readyz == 200) {
				t.Errorf("healthz says ready=%v, readyz %d", h.Ready, tc.readyz)
			}
		})
	}
}

func TestHealthDetails(t *testing.T) {
	t.Parallel()
	s := startedState(t)
	do := serve(t, s.state)
	var h healthView
	get(t, do, "/healthz", 200, &h)
	if h.Passes != 1 || h.LastPass == nil || h.OwnZone != "zone-a" || h.TableGeneration != s.gen ||
		h.NGINX != (nginxView{MasterPID: os.Getpid(), Reloads: 3, Restarts: 1}) || !h.Ready {
		t.Errorf("healthz %+v", h)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	s := startedState(t)
	do := serve(t, s.state)
	cases := map[string]struct {
		method, path string
		status       int
		errorLike    string
	}{
		"unknown route":       {"GET", "/debug/nope", 404, "no route /debug/nope"},
		"root":                {"GET", "/", 404, "/debug/backends"},
		"unknown backend":     {"GET", "/debug/backends/shop-nope-80", 404, `backend "shop-nope-80" not found`},
		"nested backend path": {"GET", "/debug/backends/a/b", 404, "no route"},
		"POST":                {"POST", "/debug/backends", 405, "method POST not allowed"},
		"DELETE a backend":    {"DELETE", "/debug/backends/shop-web-80", 405, "read-only"},
		"PUT unknown route":   {"PUT", "/nope", 404, "no route"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			r := do(tc.method, tc.path)
			if r.status != tc.status || r.contentType != "application/json" {
				t.Fatalf("%s %s: %d %q, want %d application/json", tc.method, tc.path, r.status, r.contentType, tc.status)
			}
			if msg, _ := r.json(t)["error"].(string); !strings.Contains(msg, tc.errorLike) {
				t.Errorf("error %q, want one like %q", msg, tc.errorLike)
			}
			if tc.status == 405 && string(r.header.Peek("Allow")) != "GET, HEAD" {
				t.Errorf("Allow %q, want GET, HEAD", r.header.Peek("Allow"))
			}
		})
	}
}

func TestBeforeFirstPass(t *testing.T) {
	t.Parallel()
	do := serve(t, &live.State{})
	for _, path := range []string{"/debug/backends", "/debug/backends/shop-web-80", "/debug/model", "/debug/table", "/debug/config"} {
		var e errorBody
		get(t, do, path, 503, &e)
		if e.Error == "" {
			t.Errorf("GET %s: no error message", path)
		}
	}
}

func TestHead(t *testing.T) {
	t.Parallel()
	s := startedState(t)
	do := serve(t, s.state)
	r := do("HEAD", "/healthz")
	if r.status != 200 || len(r.body) != 0 || r.contentType != "application/json" {
		t.Errorf("HEAD /healthz: %d %q with %d bytes, want 200 application/json without a body", r.status, r.contentType, len(r.body))
	}
}

func TestListenAndServe(t *testing.T) {
	t.Parallel()
	// A taken address is an error at once.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	err = (&Server{State: &live.State{}}).ListenAndServe(context.Background(), l.Addr().String())
	if err == nil || !strings.Contains(err.Error(), "address already in use") {
		t.Errorf("ListenAndServe on a taken address: %v, want address already in use", err)
	}

	// A free one serves until the context ends, and frees the address.
	addr := l.Addr().String()
	l.Close()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- (&Server{State: &live.State{}}).ListenAndServe(ctx, addr) }()
	var status int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if status, _, err = fasthttp.GetTimeout(nil, "http://"+addr+"/readyz", time.Second); err == nil {
			break
		}
	}
	if err != nil || status != 503 {
		t.Fatalf("GET /readyz: %d %v, want 503 (not synced)", status, err)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("ListenAndServe after the context ended: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("ListenAndServe did not return after its context ended")
	}
	if l, err := net.Listen("tcp", addr); err != nil {
		t.Errorf("%s still taken after the shutdown: %v", addr, err)
	} else {
		l.Close()
	}
}
