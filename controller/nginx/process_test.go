package nginx

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/controller/model"
)

// syncBuffer collects NGINX's output for a test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// testSettings listens on two free loopback ports, in a fresh runtime
// directory.
func testSettings(t *testing.T) Settings {
	t.Helper()
	s := Settings{
		RuntimeDir:      t.TempDir(),
		BindAddress:     "127.0.0.1",
		HTTPPort:        freePort(t),
		WorkerProcesses: 2,
		User:            testUser(),
	}
	for s.HTTPSPort == 0 || s.HTTPSPort == s.HTTPPort {
		s.HTTPSPort = freePort(t)
	}
	return s
}

type testNginx struct {
	*Process
	s      Settings
	errLog *syncBuffer
	access *syncBuffer
	exits  chan error
}

// startNginx applies m and starts NGINX; it is stopped when the test ends.
func startNginx(t *testing.T, s Settings, m *model.Model) *testNginx {
	t.Helper()
	n := &testNginx{s: s, errLog: &syncBuffer{}, access: &syncBuffer{}, exits: make(chan error, 10)}
	n.Process = &Process{
		Binary:     nginxBinary(t),
		RuntimeDir: s.RuntimeDir,
		Stdout:     n.access,
		Stderr:     n.errLog,
		OnExit:     func(err error) { n.exits <- err },
	}
	if err := n.apply(m, s); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := n.Start(ctx); err != nil {
		cancel()
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := n.Stop(5 * time.Second); err != nil {
			t.Error(err)
		}
		cancel()
		if t.Failed() {
			t.Logf("nginx error log:\n%s", n.errLog)
		}
	})
	return n
}

// apply does what the controller does with a new model.
func (n *testNginx) apply(m *model.Model, s Settings) error {
	files, err := WriteCerts(s.RuntimeDir, m)
	if err != nil {
		return err
	}
	conf, err := Render(m, s)
	if err != nil {
		return err
	}
	if err := n.Apply(conf); err != nil {
		return err
	}
	return PruneCerts(s.RuntimeDir, files)
}

// echo is what the test backend saw of a request.
type echo struct {
	Method string
	URI    string
	Host   string
	Header http.Header
	Remote string
	Body   string
}

func startBackend(t *testing.T) netip.AddrPort {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		json.NewEncoder(w).Encode(echo{
			Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header,
			Remote: r.RemoteAddr, Body: string(body),
		})
	}))
	t.Cleanup(srv.Close)
	return netip.MustParseAddrPort(srv.Listener.Addr().String())
}

func publish(t *testing.T, dir, backend string, peer netip.AddrPort) {
	pub, err := table.OpenPublisher(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer pub.Close()
	_, err = pub.Publish(&table.Table{Backends: []table.Backend{{
		Name:       backend,
		LocalShare: table.ShareOne,
		Peers: []table.Peer{{
			Addr: peer.Addr(), Port: peer.Port(), Preferred: true, Ready: true, Serving: true,
		}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
}

// client sends every request to NGINX's port for its scheme, whatever the
// URL's host, which stays the Host header and the TLS server name.
func client(s Settings, roots *x509.CertPool, keepAlive bool) *http.Client {
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		port := s.HTTPPort
		if strings.HasSuffix(addr, ":443") {
			port = s.HTTPSPort
		}
		var d net.Dialer
		return d.DialContext(ctx, "tcp", net.JoinHostPort(s.BindAddress, strconv.Itoa(port)))
	}
	return &http.Client{
		Timeout: 5 * time.Second,
		Transport: &http.Transport{
			DialContext:       dial,
			TLSClientConfig:   &tls.Config{RootCAs: roots},
			ForceAttemptHTTP2: true,
			DisableKeepAlives: !keepAlive,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

func do(t *testing.T, c *http.Client, method, url string, header http.Header, body string) (*http.Response, echo) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e echo
	if resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s %s: %v: %s", method, url, err, b)
		}
	}
	return resp, e
}

// TestServe runs a rendered configuration in the real NGINX and checks
// what clients and backends would notice: routing by host and path, the
// request passed as sent, the forwarded headers, websocket upgrades,
// upstream keepalive, TLS with HTTP/2, the redirect to HTTPS, and the
// refused handshake for an unknown name.
func TestServe(t *testing.T) {
	s := testSettings(t)
	backend := startBackend(t)
	publish(t, s.TableDir(), "default-echo-80", backend)
	certPEM, keyPEM := selfSigned(t, "secure.test")
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(certPEM)

	const be = "default-echo-80"
	m := &model.Model{Servers: []model.Server{
		{Host: "*.wild.test", Locations: []model.Location{{Path: "/", Backend: be}}},
		{Host: "plain.test", Locations: []model.Location{
			{Exact: true, Path: "/app", Backend: be},
			{Exact: true, Path: "/exact", Backend: be},
			{Path: "/app/", Backend: be},
		}},
		{
			Host: "secure.test", SSLRedirect: true,
			TLS:       &model.TLS{Secret: ing("default", "secure-tls"), Cert: certPEM, Key: keyPEM},
			Locations: []model.Location{{Path: "/", Backend: be}},
		},
	}}
	n := startNginx(t, s, m)
	c := client(s, roots, false)

	t.Run("request passed as sent", func(t *testing.T) {
		resp, e := do(t, c, "POST", "http://plain.test/app/x%20y?q=1&r=%2F", http.Header{
			"X-Custom":        {"yes"},
			"X-Forwarded-For": {"192.0.2.1"},
		}, "payload")
		if resp.StatusCode != 200 {
			t.Fatalf("status %d", resp.StatusCode)
		}
		want := map[string]string{
			"Method": e.Method, "URI": e.URI, "Host": e.Host, "Body": e.Body,
			"X-Custom": e.Header.Get("X-Custom"), "X-Real-Ip": e.Header.Get("X-Real-Ip"),
			"X-Forwarded-For": e.Header.Get("X-Forwarded-For"), "X-Forwarded-Proto": e.Header.Get("X-Forwarded-Proto"),
			"X-Forwarded-Host": e.Header.Get("X-Forwarded-Host"), "X-Forwarded-Port": e.Header.Get("X-Forwarded-Port"),
			"Connection": e.Header.Get("Connection"),
		}
		for k, v := range map[string]string{
			"Method": "POST", "URI": "/app/x%20y?q=1&r=%2F", "Host": "plain.test", "Body": "payload",
			"X-Custom": "yes", "X-Real-Ip": "127.0.0.1",
			"X-Forwarded-For": "192.0.2.1, 127.0.0.1", "X-Forwarded-Proto": "http",
			"X-Forwarded-Host": "plain.test", "X-Forwarded-Port": strconv.Itoa(s.HTTPPort),
			"Connection": "",
		} {
			if want[k] != v {
				t.Errorf("backend saw %s %q, want %q", k, want[k], v)
			}
		}
	})

	t.Run("routing", func(t *testing.T) {
		for _, tc := range []struct {
			url  string
			want int
		}{
			{"http://plain.test/app", 200},
			{"http://plain.test/app/", 200},
			{"http://plain.test/appx", 404},      // not a path element of /app
			{"http://plain.test/exact", 200},     // exact only
			{"http://plain.test/exact/x", 404},   //
			{"http://a.wild.test/", 200},         // one label
			{"http://a.b.wild.test/", 404},       // two labels: the default server
			{"http://wild.test/", 404},           // none
			{"http://unknown.test/app/", 404},    // the default server
			{"http://secure.test/p?q=1", 308},    // redirected
			{"https://secure.test/p?q=1", 200},   //
			{"http://PLAIN.test/app", 200},       // host names ignore case
			{"http://plain.test./app", 200},      // and a trailing dot
			{"http://A.Wild.Test/app", 200},      //
			{"http://plain.test:8080/app/", 200}, // the port in Host
		} {
			resp, _ := do(t, c, "GET", tc.url, nil, "")
			if resp.StatusCode != tc.want {
				t.Errorf("GET %s: %d, want %d", tc.url, resp.StatusCode, tc.want)
			}
		}
	})

	t.Run("redirect to HTTPS", func(t *testing.T) {
		// The HTTPS port is not 443 here, so the redirect names it.
		resp, _ := do(t, c, "GET", "http://secure.test/p/a?q=1&r=2", nil, "")
		want := "https://secure.test:" + strconv.Itoa(s.HTTPSPort) + "/p/a?q=1&r=2"
		if loc := resp.Header.Get("Location"); resp.StatusCode != 308 || loc != want {
			t.Fatalf("%d, Location %q, want %q", resp.StatusCode, loc, want)
		}
	})

	t.Run("TLS and HTTP/2", func(t *testing.T) {
		resp, e := do(t, c, "GET", "https://secure.test/p", nil, "")
		if resp.StatusCode != 200 || resp.Proto != "HTTP/2.0" {
			t.Fatalf("%d over %s", resp.StatusCode, resp.Proto)
		}
		if got := e.Header.Get("X-Forwarded-Proto"); got != "https" {
			t.Errorf("X-Forwarded-Proto %q", got)
		}
		if got := e.Header.Get("X-Forwarded-Port"); got != strconv.Itoa(s.HTTPSPort) {
			t.Errorf("X-Forwarded-Port %q", got)
		}
	})

	t.Run("unknown TLS name refused", func(t *testing.T) {
		conn, err := tls.Dial("tcp", net.JoinHostPort(s.BindAddress, strconv.Itoa(s.HTTPSPort)),
			&tls.Config{ServerName: "plain.test", InsecureSkipVerify: true})
		if err == nil {
			conn.Close()
			t.Fatal("handshake for a host without a certificate succeeded")
		}
	})

	t.Run("websocket upgrade", func(t *testing.T) {
		_, e := do(t, c, "GET", "http://plain.test/app/ws", http.Header{
			"Connection": {"Upgrade"}, "Upgrade": {"websocket"},
		}, "")
		if e.Header.Get("Connection") != "upgrade" || e.Header.Get("Upgrade") != "websocket" {
			t.Errorf("backend saw Connection %q, Upgrade %q", e.Header.Get("Connection"), e.Header.Get("Upgrade"))
		}
	})

	t.Run("upstream keepalive", func(t *testing.T) {
		// One client connection stays with one worker, whose upstream
		// connection is kept for the next request.
		kc := client(s, roots, true)
		defer kc.CloseIdleConnections()
		_, first := do(t, kc, "GET", "http://plain.test/app", nil, "")
		_, second := do(t, kc, "GET", "http://plain.test/app", nil, "")
		if first.Remote != second.Remote {
			t.Errorf("upstream connections %s then %s: not kept alive", first.Remote, second.Remote)
		}
	})

	t.Run("access log on stdout", func(t *testing.T) {
		deadline := time.Now().Add(5 * time.Second)
		for !strings.Contains(n.access.String(), `"POST /app/x%20y?q=1&r=%2F HTTP/1.1" 200`) {
			if time.Now().After(deadline) {
				t.Fatalf("no access log line for the POST:\n%s", n.access)
			}
			time.Sleep(10 * time.Millisecond)
		}
		if !strings.Contains(n.access.String(), `"`+be+`" "`+backend.String()+`"`) {
			t.Errorf("access log names neither backend nor peer:\n%s", n.access)
		}
	})
}

// TestProcess applies configurations to a running NGINX, breaks it, and
// stops it.
func TestProcess(t *testing.T) {
	s := testSettings(t)
	// No endpoint table: a location that proxies answers 503, a server
	// without one 404.
	plain := &model.Model{}
	proxying := &model.Model{DefaultBackend: "default-missing-80"}
	n := startNginx(t, s, plain)
	c := client(s, nil, false)
	status := func(t *testing.T) int {
		t.Helper()
		resp, _ := do(t, c, "GET", "http://any.test/", nil, "")
		return resp.StatusCode
	}
	if got := status(t); got != 404 {
		t.Fatalf("first configuration: %d, want 404", got)
	}
	master := n.MasterPID()
	workers := Children(master)
	if master == 0 || len(workers) != 2 {
		t.Fatalf("master %d with workers %v, want 2", master, workers)
	}

	t.Run("apply", func(t *testing.T) {
		if err := n.apply(proxying, s); err != nil {
			t.Fatal(err)
		}
		if n.Reloads() != 1 || n.MasterPID() != master {
			t.Fatalf("%d reloads, master %d (was %d)", n.Reloads(), n.MasterPID(), master)
		}
		// Apply returns once the old workers are gone (they had no
		// request to finish), so only the new configuration answers.
		if now := Children(master); slices.ContainsFunc(now, func(pid int) bool { return slices.Contains(workers, pid) }) {
			t.Errorf("after Apply the master still has the old workers: %v (old %v)", now, workers)
		}
		waitFor(t, "the new workers", func() bool { return len(Children(master)) == 2 })
		if got := status(t); got != 503 {
			t.Fatalf("new configuration: %d, want 503", got)
		}
		prev, err := os.ReadFile(filepath.Join(s.RuntimeDir, "nginx.conf.prev"))
		if want, _ := Render(plain, s); err != nil || !bytes.Equal(prev, want) {
			t.Errorf("nginx.conf.prev is not the previous configuration (%v)", err)
		}
		// The same configuration again is no reload.
		if err := n.apply(proxying, s); err != nil || n.Reloads() != 1 {
			t.Fatalf("same configuration: %v, %d reloads", err, n.Reloads())
		}
	})
	current, err := os.ReadFile(s.ConfFile())
	if err != nil {
		t.Fatal(err)
	}

	t.Run("broken configuration", func(t *testing.T) {
		broken := bytes.Replace(current, []byte("keepalive 64;"), []byte("keepalive 64"), 1)
		err := n.Apply(broken)
		var cerr *ConfigError
		if !errors.As(err, &cerr) {
			t.Fatalf("Apply: %v, want a *ConfigError", err)
		}
		if !strings.Contains(cerr.Message, `[emerg] unexpected "}" in nginx.conf:`) || cerr.Line == 0 ||
			strings.TrimSpace(cerr.Text) != "}" {
			t.Errorf("error %q (line %d %q) does not point at the line", err, cerr.Line, cerr.Text)
		}
		t.Logf("Apply: %v", err)
		n.stillRunning(t, master, current, 1)
		if got := status(t); got != 503 {
			t.Fatalf("after a broken configuration: %d, want 503", got)
		}
	})

	t.Run("reload refused", func(t *testing.T) {
		// nginx -t does not bind, the reload does: a taken port makes
		// the master keep its configuration.
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		taken := s
		taken.HTTPSPort = l.Addr().(*net.TCPAddr).Port
		err = n.apply(proxying, taken)
		if err == nil || !strings.Contains(err.Error(), "Address already in use") {
			t.Fatalf("Apply: %v, want the bind error", err)
		}
		t.Logf("Apply: %v", err)
		n.stillRunning(t, master, current, 1)
	})

	t.Run("master killed", func(t *testing.T) {
		if err := syscall.Kill(master, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-n.exits:
			t.Logf("OnExit: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("OnExit not called")
		}
		waitFor(t, "a new master", func() bool { return n.MasterPID() != 0 && n.MasterPID() != master })
		if n.Restarts() != 1 {
			t.Errorf("%d restarts", n.Restarts())
		}
		if got := status(t); got != 503 {
			t.Fatalf("after the restart: %d, want 503", got)
		}
		if err := n.Reload(); err != nil || n.Reloads() != 2 {
			t.Fatalf("reload of the new master: %v, %d reloads", err, n.Reloads())
		}
	})

	t.Run("stop", func(t *testing.T) {
		pid := n.MasterPID()
		if err := n.Stop(5 * time.Second); err != nil {
			t.Fatal(err)
		}
		if n.MasterPID() != 0 || syscall.Kill(-pid, 0) == nil {
			t.Fatalf("processes of master %d left", pid)
		}
		if _, err := net.Dial("tcp", net.JoinHostPort(s.BindAddress, strconv.Itoa(s.HTTPPort))); err == nil {
			t.Fatal("still listening")
		}
		if !strings.Contains(n.errLog.String(), "gracefully shutting down") {
			t.Errorf("no graceful shutdown in the error log")
		}
		if err := n.Reload(); !errors.Is(err, ErrNotRunning) {
			t.Errorf("Reload after Stop: %v", err)
		}
		select {
		case err := <-n.exits:
			t.Errorf("OnExit called for Stop: %v", err)
		default:
		}
	})
}

// stillRunning checks that a failed Apply left NGINX as it was.
func (n *testNginx) stillRunning(t *testing.T, master int, conf []byte, reloads uint64) {
	t.Helper()
	if n.MasterPID() != master || n.Reloads() != reloads {
		t.Errorf("master %d (was %d), %d reloads (want %d)", n.MasterPID(), master, n.Reloads(), reloads)
	}
	if got, err := os.ReadFile(n.s.ConfFile()); err != nil || !bytes.Equal(got, conf) {
		t.Errorf("nginx.conf changed (%v)", err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestStartContext: NGINX stops when Start's context is done.
func TestStartContext(t *testing.T) {
	s := testSettings(t)
	conf, err := Render(&model.Model{}, s)
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{Binary: nginxBinary(t), RuntimeDir: s.RuntimeDir}
	if err := p.Apply(conf); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	pid := p.MasterPID()
	cancel()
	waitFor(t, "nginx to stop", func() bool { return p.MasterPID() == 0 && syscall.Kill(-pid, 0) != nil })
	if err := p.Start(context.Background()); err == nil {
		t.Fatal("a stopped Process started again")
	}
}

// TestStartFails: a configuration NGINX cannot start with is reported with
// NGINX's own message.
func TestStartFails(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte("events {}\nhttp { nonsense; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p := &Process{Binary: nginxBinary(t), RuntimeDir: dir}
	err := p.Start(context.Background())
	if err == nil || !strings.Contains(err.Error(), `unknown directive "nonsense"`) {
		t.Fatalf("Start: %v", err)
	}
	if err := p.Test([]byte("pid nginx.pid;\nevents {}\n")); err != nil {
		t.Fatalf("Test of a minimal configuration: %v", err)
	}
}

func TestFindBinary(t *testing.T) {
	dir := t.TempDir()
	exe := filepath.Join(dir, "nginx")
	if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	empty := t.TempDir()
	t.Setenv("PATH", empty)

	if got, err := findBinary(exe, ""); err != nil || got != exe {
		t.Errorf("flag: %q, %v", got, err)
	}
	if _, err := findBinary(filepath.Join(empty, "nginx"), dir); err == nil {
		t.Error("a flag naming a missing file fell back to another binary")
	}
	if got, err := findBinary("", dir); err != nil || got != exe {
		t.Errorf("beside the executable: %q, %v", got, err)
	}
	_, err := findBinary("", empty)
	if err == nil || !strings.Contains(err.Error(), filepath.Join(empty, "nginx")) || !strings.Contains(err.Error(), "$PATH") {
		t.Errorf("nothing found: %v", err)
	}
	t.Setenv("PATH", dir)
	if got, err := findBinary("", empty); err != nil || got != exe {
		t.Errorf("in $PATH: %q, %v", got, err)
	}
}
