package controller

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/test/harness"
)

// debugShop is the manifests of the debug tests: host shop.test (TLS) to
// Service web, whose peers are web-a (zone-a, the controller's zone) and
// web-b (zone-b), and /api to Service api, whose only peer is in zone-b.
func debugShop(t *testing.T) (files map[string]string, webA, webB, api *harness.EchoBackend) {
	t.Helper()
	webA = harness.StartEchoBackend(t, "web-a", "127.0.0.241", "zone-a")
	webB = harness.StartEchoBackend(t, "web-b", "127.0.0.242", "zone-b")
	api = harness.StartEchoBackend(t, "api", "127.0.0.243", "zone-b")
	certPEM, keyPEM, _ := selfSigned(t, "shop.test")
	ingress := `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: shop
  namespace: shop
spec:
  ingressClassName: zonal
  tls:
  - hosts: [shop.test]
    secretName: shop-tls
  rules:
  - host: shop.test
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web, port: {number: 80}}}}
      - {path: /api, pathType: Prefix, backend: {service: {name: api, port: {number: 80}}}}
`
	return map[string]string{
		"class.yaml":    ingressClass,
		"ingress.yaml":  ingress,
		"services.yaml": docs(service("shop", "web", webA, webB), service("shop", "api", api)),
		"secret.yaml":   tlsSecret("shop", "shop-tls", certPEM, keyPEM),
	}, webA, webB, api
}

// startDebug starts the controller in zone-a, mode local, with its debug
// endpoint on a free loopback port, and waits until the endpoint answers.
func startDebug(t *testing.T, files map[string]string) (*harness.Controller, string) {
	t.Helper()
	port, err := harness.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	c := harness.StartController(t, harness.ControllerConfig{
		Manifests: files,
		Args:      []string{"--debug-address", addr, "--metrics-address=", "--zone-mode", "local"},
	})
	if err := harness.WaitUntil(5*time.Second, 20*time.Millisecond, func() error {
		status, body, err := debugGet("http://" + addr + "/healthz")
		if err != nil {
			return err
		}
		var h struct {
			Ready bool `json:"ready"`
			NGINX struct {
				MasterPID int `json:"masterPID"`
			} `json:"nginx"`
		}
		if status != http.StatusOK || json.Unmarshal(body, &h) != nil || !h.Ready {
			return fmt.Errorf("/healthz: %d %s", status, body)
		}
		// Another process could have taken the port FreePort saw free.
		if h.NGINX.MasterPID != c.MasterPID() {
			return harness.StopWaiting(fmt.Errorf("%s serves NGINX master %d, not this controller's %d", addr, h.NGINX.MasterPID, c.MasterPID()))
		}
		return nil
	}); err != nil {
		t.Fatalf("the debug endpoint on %s: %v; log:\n%s", addr, err, c.Log())
	}
	return c, addr
}

// debugGet GETs url and reads the whole answer.
func debugGet(url string) (int, []byte, error) {
	return debugDo("GET", url)
}

func debugDo(method, url string) (int, []byte, error) {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); method != "HEAD" && !strings.HasPrefix(ct, "application/json") && !strings.HasPrefix(ct, "text/plain") {
		return resp.StatusCode, nil, fmt.Errorf("%s %s: Content-Type %q", method, url, ct)
	}
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// getJSON GETs the debug endpoint's path, checks the status and decodes
// the JSON answer into v.
func getJSON(t *testing.T, addr, path string, status int, v any) []byte {
	t.Helper()
	got, body, err := debugGet("http://" + addr + path)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	if got != status {
		t.Fatalf("GET %s: %d, want %d; body:\n%s", path, got, status, body)
	}
	if v != nil {
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v\n%s", path, err, body)
		}
	}
	return body
}

// debugBackend is the part of /debug/backends/{name} the tests check.
type debugBackend struct {
	Name           string         `json:"name"`
	Service        string         `json:"service"`
	ZoneMode       string         `json:"zoneMode"`
	Fallback       string         `json:"fallback"`
	PeerCount      int            `json:"peerCount"`
	PeersByZone    map[string]int `json:"peersByZone"`
	PreferredCount int            `json:"preferredCount"`
	LocalShare     struct {
		BasisPoints int     `json:"basisPoints"`
		Fraction    float64 `json:"fraction"`
	} `json:"localShare"`
	Ingresses []string `json:"ingresses"`
	Peers     []struct {
		Address   string `json:"address"`
		Port      int    `json:"port"`
		Zone      string `json:"zone"`
		Weight    int    `json:"weight"`
		Ready     bool   `json:"ready"`
		Preferred bool   `json:"preferred"`
	} `json:"peers"`
}

// TestDebugEndpoint reads every route of the debug endpoint of a running
// controller and checks it against what the controller really does: the
// zone decisions of local mode, the table file the workers read, the
// nginx.conf NGINX runs, the NGINX master.
func TestDebugEndpoint(t *testing.T) {
	t.Parallel()
	files, webA, webB, _ := debugShop(t)
	c, addr := startDebug(t, files)

	t.Run("backends", func(t *testing.T) {
		var list struct {
			OwnZone  string         `json:"ownZone"`
			Backends []debugBackend `json:"backends"`
		}
		getJSON(t, addr, "/debug/backends", 200, &list)
		if list.OwnZone != "zone-a" || len(list.Backends) != 2 {
			t.Fatalf("own zone %q with %d backends, want zone-a with 2", list.OwnZone, len(list.Backends))
		}
		api, web := list.Backends[0], list.Backends[1]
		if web.Name != "shop-web-80" || web.ZoneMode != "local" || web.Fallback != "" || web.PreferredCount != 1 ||
			web.LocalShare.BasisPoints != 10000 || web.PeersByZone["zone-a"] != 1 || web.PeersByZone["zone-b"] != 1 {
			t.Errorf("web: %+v, want local mode with its zone-a peer preferred, all requests local", web)
		}
		if api.Name != "shop-api-80" || api.Fallback == "" || api.PreferredCount != 0 {
			t.Errorf("api: %+v, want a fallback (its only peer is in zone-b)", api)
		}
	})

	t.Run("backend", func(t *testing.T) {
		var web debugBackend
		getJSON(t, addr, "/debug/backends/shop-web-80", 200, &web)
		if web.Service != "shop/web" || !slices.Equal(web.Ingresses, []string{"shop/shop"}) || len(web.Peers) != 2 {
			t.Fatalf("web: %+v, want Service shop/web used by Ingress shop/shop, with 2 peers", web)
		}
		for _, p := range web.Peers {
			want := map[string]bool{webA.IP(): true, webB.IP(): false}
			if preferred, ok := want[p.Address]; !ok || p.Preferred != preferred || !p.Ready || p.Weight != 1 {
				t.Errorf("peer %+v: want %s preferred and %s not, both ready with weight 1", p, webA.IP(), webB.IP())
			}
		}
		var e struct{ Error string }
		getJSON(t, addr, "/debug/backends/shop-nope-80", 404, &e)
		if !strings.Contains(e.Error, `"shop-nope-80" not found`) {
			t.Errorf("404 error %q", e.Error)
		}
	})

	t.Run("table", func(t *testing.T) {
		var live struct {
			Control  uint64 `json:"controlGeneration"`
			Snapshot struct {
				Generation uint64 `json:"generation"`
				Zone       string `json:"zone"`
				Backends   []struct {
					Name       string `json:"name"`
					LocalShare int    `json:"localShare"`
					Peers      []struct {
						Address   string `json:"address"`
						Preferred bool   `json:"preferred"`
					} `json:"peers"`
				} `json:"backends"`
			} `json:"snapshot"`
		}
		getJSON(t, addr, "/debug/table", 200, &live)
		if live.Control == 0 || live.Snapshot.Generation != live.Control || live.Snapshot.Zone != "zone-a" || len(live.Snapshot.Backends) != 2 {
			t.Fatalf("table %+v, want the published generation for zone-a with 2 backends", live)
		}
		web := live.Snapshot.Backends[1]
		if web.Name != "shop-web-80" || web.LocalShare != 10000 || len(web.Peers) != 2 ||
			web.Peers[0].Address != webA.IP() || !web.Peers[0].Preferred || web.Peers[1].Preferred {
			t.Errorf("web in the table: %+v, want %s first and preferred", web, webA.IP())
		}
		// What `zonal table dump` reads from the runtime directory: the
		// same decoding of the same files.
		out, err := exec.Command(c.Bin, "table", "dump", "--dir", c.RuntimeDir+"/table").Output()
		if err != nil {
			t.Fatalf("zonal table dump: %v", err)
		}
		var dump struct {
			Control uint64 `json:"controlGeneration"`
		}
		if err := json.Unmarshal(out, &dump); err != nil || dump.Control != live.Control {
			t.Errorf("zonal table dump: generation %d (%v), debug endpoint %d", dump.Control, err, live.Control)
		}
	})

	t.Run("config", func(t *testing.T) {
		status, body, err := debugGet("http://" + addr + "/debug/config")
		if err != nil || status != 200 {
			t.Fatalf("GET /debug/config: %d %v", status, err)
		}
		want, err := os.ReadFile(c.ConfFile())
		if err != nil {
			t.Fatal(err)
		}
		if string(body) != string(want) {
			t.Errorf("/debug/config differs from %s", c.ConfFile())
		}
	})

	t.Run("model", func(t *testing.T) {
		var m struct {
			Servers []struct {
				Host string `json:"host"`
				TLS  *struct {
					Secret string `json:"secret"`
				} `json:"tls"`
			} `json:"servers"`
			Backends []struct {
				Name string `json:"name"`
			} `json:"backends"`
		}
		body := getJSON(t, addr, "/debug/model", 200, &m)
		if len(m.Servers) != 1 || m.Servers[0].Host != "shop.test" || m.Servers[0].TLS == nil || m.Servers[0].TLS.Secret != "shop/shop-tls" {
			t.Errorf("servers %+v, want shop.test with the Secret shop/shop-tls", m.Servers)
		}
		if len(m.Backends) != 2 {
			t.Errorf("backends %+v", m.Backends)
		}
		for _, leak := range []string{"PRIVATE KEY", "CERTIFICATE", "MII"} {
			if strings.Contains(string(body), leak) {
				t.Errorf("/debug/model contains %q", leak)
			}
		}
	})

	t.Run("health", func(t *testing.T) {
		var h struct {
			Status string `json:"status"`
			Ready  bool   `json:"ready"`
			NGINX  struct {
				MasterPID int `json:"masterPID"`
			} `json:"nginx"`
		}
		getJSON(t, addr, "/healthz", 200, &h)
		if h.Status != "ok" || !h.Ready || h.NGINX.MasterPID != c.MasterPID() {
			t.Errorf("healthz %+v, want ok, ready, master %d", h, c.MasterPID())
		}
		var r struct{ Status string }
		getJSON(t, addr, "/readyz", 200, &r)
		if r.Status != "ready" {
			t.Errorf("readyz %+v", r)
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, tc := range []struct {
			method, path string
			status       int
		}{
			{"GET", "/debug/nope", 404},
			{"GET", "/", 404},
			{"POST", "/debug/backends", 405},
			{"DELETE", "/healthz", 405},
		} {
			status, body, err := debugDo(tc.method, "http://"+addr+tc.path)
			var e struct{ Error string }
			if err != nil || status != tc.status || json.Unmarshal(body, &e) != nil || e.Error == "" {
				t.Errorf("%s %s: %d %v %s, want %d with a JSON error", tc.method, tc.path, status, err, body, tc.status)
			}
		}
		if status, body, err := debugDo("HEAD", "http://"+addr+"/healthz"); err != nil || status != 200 || len(body) != 0 {
			t.Errorf("HEAD /healthz: %d %v with %d bytes, want 200 without a body", status, err, len(body))
		}
	})
}

// TestDebugFollowsChanges removes a peer from the manifests: the debug
// endpoint shows the new endpoints and the new table generation.
func TestDebugFollowsChanges(t *testing.T) {
	t.Parallel()
	files, webA, _, api := debugShop(t)
	c, addr := startDebug(t, files)
	var before struct{ Generation uint64 }
	getJSON(t, addr, "/debug/backends", 200, &before)

	// web keeps only its zone-b peer: local mode falls back to all peers.
	webB2 := harness.StartEchoBackend(t, "web-b2", "127.0.0.244", "zone-b")
	c.WriteManifest("services.yaml", docs(service("shop", "web", webB2), service("shop", "api", api)))
	var web debugBackend
	err := harness.WaitUntil(changeTimeout, 20*time.Millisecond, func() error {
		getJSON(t, addr, "/debug/backends/shop-web-80", 200, &web)
		if len(web.Peers) != 1 || web.Peers[0].Address != webB2.IP() {
			return fmt.Errorf("peers %+v", web.Peers)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("/debug/backends/shop-web-80 did not follow the edit (%s gone, %s added): %v", webA.IP(), webB2.IP(), err)
	}
	if web.Fallback != "no ready endpoint in the own zone" || web.PreferredCount != 0 {
		t.Errorf("web: fallback %q, %d preferred; want the fallback for no local endpoint", web.Fallback, web.PreferredCount)
	}
	var after struct{ Generation uint64 }
	getJSON(t, addr, "/debug/backends", 200, &after)
	if after.Generation <= before.Generation {
		t.Errorf("table generation %d after the edit, %d before", after.Generation, before.Generation)
	}
}

// dbgRun runs `zonal dbg ARGS --address addr` and returns its standard
// output, standard error and exit code.
func dbgRun(t *testing.T, bin, addr string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	cmd := exec.Command(bin, append(append([]string{"dbg"}, args...), "--address", addr)...)
	cmd.Env = append(os.Environ(), "ZONAL_DEBUG_ADDRESS=")
	var out, errOut strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errOut
	done := make(chan error, 1)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var exit *exec.ExitError
		if err != nil && !errors.As(err, &exit) {
			t.Fatalf("zonal dbg %v: %v", args, err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("zonal dbg %v did not finish within 30 s", args)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

// TestDbgCommand runs every `zonal dbg` subcommand as a user would,
// against a running controller.
func TestDbgCommand(t *testing.T) {
	t.Parallel()
	files, webA, webB, _ := debugShop(t)
	c, addr := startDebug(t, files)
	conf, err := os.ReadFile(c.ConfFile())
	if err != nil {
		t.Fatal(err)
	}

	// JSON answers: pretty-printed, and every one names what it is about.
	for _, tc := range []struct {
		args []string
		want string // a field the output holds
	}{
		{[]string{"backends", "list"}, `"name": "shop-web-80"`},
		{[]string{"backends"}, `"name": "shop-api-80"`},
		{[]string{"backends", "get", "shop-web-80"}, `"address": "` + webB.IP() + `"`},
		{[]string{"backends", "all"}, `"peers": [`},
		{[]string{"table"}, `"controlGeneration": `},
		{[]string{"model"}, `"secret": "shop/shop-tls"`},
		{[]string{"health"}, `"status": "ok"`},
	} {
		out, errOut, code := dbgRun(t, c.Bin, addr, tc.args...)
		if code != 0 || !strings.Contains(out, tc.want) || !json.Valid([]byte(out)) || !strings.Contains(out, "\n  ") {
			t.Errorf("zonal dbg %s: exit %d, stderr %q; want pretty JSON with %s, got:\n%.600s",
				strings.Join(tc.args, " "), code, errOut, tc.want, out)
		}
	}

	out, errOut, code := dbgRun(t, c.Bin, addr, "conf")
	if code != 0 || out != string(conf) {
		t.Errorf("zonal dbg conf: exit %d, stderr %q; want %s as it is", code, errOut, c.ConfFile())
	}

	// --query: strings raw, arrays and objects as JSON, numbers as they are.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backends", "get", "shop-web-80", "--query", `peers.#(zone=="zone-a")#.address`}, `["` + webA.IP() + `"]`},
		{[]string{"backends", "get", "shop-web-80", "--query", `peers.#(preferred==true).address`}, webA.IP()},
		{[]string{"backends", "list", "-q", `backends.#.name`}, `["shop-api-80","shop-web-80"]`},
		{[]string{"backends", "get", "shop-web-80", "--query", "localShare.basisPoints"}, "10000"},
		{[]string{"backends", "all", "--query", `backends.#(name=="shop-api-80").fallback`}, "no ready endpoint in the own zone"},
		{[]string{"table", "--query", "snapshot.zone"}, "zone-a"},
		{[]string{"health", "--query", "nginx.masterPID"}, strconv.Itoa(c.MasterPID())},
	} {
		out, errOut, code := dbgRun(t, c.Bin, addr, tc.args...)
		if got := compact(out); code != 0 || got != tc.want {
			t.Errorf("zonal dbg %s: exit %d, stderr %q, output %q; want %q", strings.Join(tc.args, " "), code, errOut, got, tc.want)
		}
	}

	// Errors: the server's message for an unknown backend, a query that
	// selects nothing, --query on text.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"backends", "get", "shop-nope-80"}, `zonal: backend "shop-nope-80" not found`},
		{[]string{"backends", "get", "shop-web-80", "--query", "nope"}, `--query "nope" selects nothing`},
		{[]string{"conf", "--query", "x"}, "--query selects from JSON"},
	} {
		out, errOut, code := dbgRun(t, c.Bin, addr, tc.args...)
		if code != 1 || out != "" || !strings.Contains(errOut, tc.want) {
			t.Errorf("zonal dbg %s: exit %d, stdout %q, stderr %q; want exit 1 and %q", strings.Join(tc.args, " "), code, out, errOut, tc.want)
		}
	}
}

// compact is out without its JSON indentation and final newline.
func compact(out string) string {
	out = strings.TrimSpace(out)
	var v any
	if json.Unmarshal([]byte(out), &v) == nil {
		if b, err := json.Marshal(v); err == nil && (strings.HasPrefix(out, "[") || strings.HasPrefix(out, "{")) {
			return string(b)
		}
	}
	return out
}

// TestDbgUnreachable runs `zonal dbg` with no controller at the address:
// it says so, and what to check, at once.
func TestDbgUnreachable(t *testing.T) {
	t.Parallel()
	bin, _ := harness.Binaries(t)
	port, err := harness.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for _, args := range [][]string{{"backends", "list"}, {"health"}, {"conf"}} {
		start := time.Now()
		out, errOut, code := dbgRun(t, bin, addr, args...)
		want := "zonal: cannot reach the zonal debug endpoint at http://" + addr + ": "
		if code != 1 || out != "" || !strings.HasPrefix(errOut, want) || !strings.Contains(errOut, "connection refused") ||
			!strings.Contains(errOut, "is the controller running, and is --address its --debug-address?") {
			t.Errorf("zonal dbg %v: exit %d, stdout %q, stderr %q; want exit 1 and %q...", args, code, out, errOut, want)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("zonal dbg %v took %v to fail", args, d)
		}
	}
}
