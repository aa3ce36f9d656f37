package harness

// Helpers for end-to-end tests of the controller: the real bin/zonal in
// local mode as a child process, fed by a manifests directory the test
// writes, with its NGINX on free loopback ports; and echo backends that
// answer with the request they received, so that a test can check what
// NGINX passed on.

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// MissingBuild is the message a controller test fails (or, with -short,
// skips) with when bin/zonal or bin/nginx is not built.
const MissingBuild = "bin/zonal or bin/nginx missing: run make build"

// Binaries returns bin/zonal and bin/nginx of the repository ($ZONAL_BIN
// and $ZONAL_NGINX override them). A missing one fails the test with
// MissingBuild, or skips it when -short is given.
func Binaries(tb testing.TB) (zonal, nginx string) {
	tb.Helper()
	zonal, nginx = os.Getenv("ZONAL_BIN"), os.Getenv("ZONAL_NGINX")
	if zonal == "" || nginx == "" {
		root, err := RepoRoot()
		if err != nil {
			tb.Fatal(err)
		}
		if zonal == "" {
			zonal = filepath.Join(root, "bin", "zonal")
		}
		if nginx == "" {
			nginx = filepath.Join(root, "bin", "nginx")
		}
	}
	for _, path := range []string{zonal, nginx} {
		if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			if testing.Short() {
				tb.Skip(MissingBuild)
			}
			tb.Fatalf("%s (looked for %s)", MissingBuild, path)
		}
	}
	return zonal, nginx
}

// ControllerConfig says how to run one bin/zonal. The zero value runs it
// on an empty manifests directory with two NGINX workers in zone-a.
type ControllerConfig struct {
	// Manifests are written into the manifests directory before the
	// start, by file name.
	Manifests map[string]string
	// Zone is --zone; "" means zone-a.
	Zone string
	// Workers is --worker-processes; 0 means 2.
	Workers int
	// Args are more flags for `zonal controller`.
	Args []string
}

// Controller is one `bin/zonal controller --manifests DIR` running as a
// child of the test, with the NGINX it runs.
type Controller struct {
	tb       testing.TB
	Bin      string
	NginxBin string
	// Dir holds everything of this controller: manifests/, runtime/,
	// controller.log (its standard error: its own log and NGINX's error
	// log) and access.log (its standard output). It is kept when the test
	// fails.
	Dir         string
	ManifestDir string
	RuntimeDir  string
	HTTPPort    int
	HTTPSPort   int
	HTTPAddr    string // 127.0.0.1:HTTPPort
	HTTPSAddr   string // 127.0.0.1:HTTPSPort
	Workers     int

	cmd      *exec.Cmd
	exited   chan struct{}
	state    *os.ProcessState
	masters  sync.Map // every NGINX master pid seen, for the cleanup
	stopOnce sync.Once
}

// StartController writes cfg.Manifests and starts bin/zonal on them, and
// waits (at most 20 s) until NGINX answers HTTP with all its workers. When
// the test ends it stops the controller with SIGTERM and, if that does
// not end it and its NGINX within 15 s, kills both process groups.
func StartController(tb testing.TB, cfg ControllerConfig) *Controller {
	tb.Helper()
	bin, nginxBin := Binaries(tb)
	dir := TempDir(tb)
	c := &Controller{
		tb: tb, Bin: bin, NginxBin: nginxBin, Dir: dir,
		ManifestDir: filepath.Join(dir, "manifests"),
		RuntimeDir:  filepath.Join(dir, "runtime"),
		Workers:     cfg.Workers,
	}
	if c.Workers == 0 {
		c.Workers = 2
	}
	if err := os.Mkdir(c.ManifestDir, 0o755); err != nil {
		tb.Fatal(err)
	}
	for name, content := range cfg.Manifests {
		c.WriteManifest(name, content)
	}
	zone := cfg.Zone
	if zone == "" {
		zone = "zone-a"
	}
	var lastErr error
	for attempt := 1; attempt <= 3; attempt++ {
		http, err1 := FreePort("127.0.0.1")
		https, err2 := FreePort("127.0.0.1")
		if err := errors.Join(err1, err2); err != nil {
			tb.Fatal(err)
		}
		c.setPorts(http, https)
		args := append([]string{
			"controller",
			"--manifests", c.ManifestDir,
			"--runtime-dir", c.RuntimeDir,
			"--bind-address", "127.0.0.1",
			"--http-port", strconv.Itoa(http),
			"--https-port", strconv.Itoa(https),
			"--zone", zone,
			"--nginx-binary", nginxBin,
			"--worker-processes", strconv.Itoa(c.Workers),
			// Off unless a test asks (a later flag wins): the defaults
			// are fixed ports that parallel tests would fight over.
			"--metrics-address=",
			"--debug-address=",
		}, cfg.Args...)
		lastErr = c.start(args)
		if lastErr == nil {
			tb.Cleanup(c.cleanup)
			return c
		}
		// Another process may have taken a port since FreePort saw it free.
		if !strings.Contains(lastErr.Error(), "Address already in use") {
			break
		}
	}
	tb.Fatalf("starting %s: %v", bin, lastErr)
	return nil
}

func (c *Controller) setPorts(http, https int) {
	c.HTTPPort, c.HTTPSPort = http, https
	c.HTTPAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(http))
	c.HTTPSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(https))
}

func (c *Controller) start(args []string) error {
	logFile, err := os.Create(c.logPath())
	if err != nil {
		return err
	}
	defer logFile.Close()
	accessLog, err := os.Create(filepath.Join(c.Dir, "access.log"))
	if err != nil {
		return err
	}
	defer accessLog.Close()
	cmd := exec.Command(c.Bin, args...)
	cmd.Stdout, cmd.Stderr = accessLog, logFile
	// Only the flags count: every flag has a ZONAL_ twin that the
	// developer's environment might set, and NODE_NAME names the zone.
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ZONAL_") && !strings.HasPrefix(kv, "NODE_NAME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	// Its own process group, to kill whatever is left of it. NGINX runs
	// in a group of its own (the controller makes it so).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", c.Bin, err)
	}
	c.cmd = cmd
	c.exited = make(chan struct{})
	go func() {
		cmd.Wait()
		c.state = cmd.ProcessState
		close(c.exited)
	}()
	if err := c.waitReady(20 * time.Second); err != nil {
		c.kill()
		return fmt.Errorf("%w\n--- %s:\n%s", err, c.logPath(), c.Log())
	}
	return nil
}

// waitReady waits until the NGINX master named by the pid file has all its
// workers and a request on the HTTP port gets an answer from NGINX.
func (c *Controller) waitReady(timeout time.Duration) error {
	step := "the pid file"
	err := WaitUntil(timeout, 10*time.Millisecond, func() error {
		select {
		case <-c.exited:
			return StopWaiting(fmt.Errorf("the controller exited during start (%s)", c.state))
		default:
		}
		master := c.MasterPID()
		if master == 0 {
			return errors.New(step)
		}
		step = "workers"
		if n := len(Children(master)); n != c.Workers {
			return fmt.Errorf("%s: %d of %d", step, n, c.Workers)
		}
		step = "an HTTP answer"
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+c.HTTPAddr+"/", nil)
		tr := &http.Transport{DisableKeepAlives: true}
		defer tr.CloseIdleConnections()
		resp, err := tr.RoundTrip(req)
		if err != nil {
			return fmt.Errorf("%s: %w", step, err)
		}
		resp.Body.Close()
		if resp.Header.Get("Server") != "nginx" {
			return StopWaiting(fmt.Errorf("%s answers as %q, not NGINX: Address already in use?", c.HTTPAddr, resp.Header.Get("Server")))
		}
		return nil
	})
	var stop errStop
	switch {
	case errors.As(err, &stop):
		return err
	case err != nil:
		return fmt.Errorf("controller not ready after %v: waiting for %w", timeout, err)
	}
	return nil
}

func (c *Controller) logPath() string { return filepath.Join(c.Dir, "controller.log") }

// Log is the controller's standard error so far: its log records, among
// them NGINX's error log lines (source=nginx).
func (c *Controller) Log() string { return c.LogSince(0) }

// LogSize is the current size of the log: an offset for LogSince.
func (c *Controller) LogSize() int64 {
	st, err := os.Stat(c.logPath())
	if err != nil {
		return 0
	}
	return st.Size()
}

// LogSince is the log from byte offset off on.
func (c *Controller) LogSince(off int64) string {
	b, err := os.ReadFile(c.logPath())
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}

// WaitLog waits at most timeout for a log line after offset off that
// holds every one of substrs, and returns it ("" if none came).
func (c *Controller) WaitLog(off int64, timeout time.Duration, substrs ...string) string {
	var found string
	WaitUntil(timeout, 20*time.Millisecond, func() error {
		for line := range strings.Lines(c.LogSince(off)) {
			if containsAll(line, substrs) {
				found = strings.TrimRight(line, "\n")
				return nil
			}
		}
		return errors.New("not yet")
	})
	return found
}

func containsAll(s string, substrs []string) bool {
	for _, sub := range substrs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// PIDFile is the NGINX pid file the controller's configuration names.
func (c *Controller) PIDFile() string { return filepath.Join(c.RuntimeDir, "nginx.pid") }

// ConfFile is the nginx.conf NGINX runs.
func (c *Controller) ConfFile() string { return filepath.Join(c.RuntimeDir, "nginx.conf") }

// MasterPID is the NGINX master named by the pid file, 0 if there is none.
func (c *Controller) MasterPID() int {
	b, err := os.ReadFile(c.PIDFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	c.masters.Store(pid, true)
	return pid
}

// WorkerPIDs are the current children of the NGINX master, sorted. Right
// after a reload they include the old workers until they have finished.
func (c *Controller) WorkerPIDs() []int {
	if m := c.MasterPID(); m != 0 {
		return Children(m)
	}
	return nil
}

// WriteManifest writes a file of the manifests directory as an editor
// that saves atomically does: a temporary file renamed into place, so the
// controller never reads half a file.
func (c *Controller) WriteManifest(name, content string) {
	c.tb.Helper()
	tmp := filepath.Join(c.ManifestDir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		c.tb.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(c.ManifestDir, name)); err != nil {
		c.tb.Fatal(err)
	}
}

// RemoveManifest deletes a file of the manifests directory.
func (c *Controller) RemoveManifest(name string) {
	c.tb.Helper()
	if err := os.Remove(filepath.Join(c.ManifestDir, name)); err != nil {
		c.tb.Fatal(err)
	}
}

// Signal sends sig to the controller.
func (c *Controller) Signal(sig os.Signal) error { return c.cmd.Process.Signal(sig) }

// Wait waits at most timeout for the controller to exit and returns how
// it exited.
func (c *Controller) Wait(timeout time.Duration) (*os.ProcessState, error) {
	select {
	case <-c.exited:
		return c.state, nil
	case <-time.After(timeout):
		return nil, fmt.Errorf("controller (pid %d) still running after %v", c.cmd.Process.Pid, timeout)
	}
}

// Exited tells whether the controller process has ended.
func (c *Controller) Exited() bool {
	select {
	case <-c.exited:
		return true
	default:
		return false
	}
}

// cleanup stops the controller gracefully if it still runs, and kills
// whatever is left of it and of its NGINX masters' process groups.
func (c *Controller) cleanup() {
	c.stopOnce.Do(func() {
		c.MasterPID() // remember the current master
		if !c.Exited() {
			c.cmd.Process.Signal(syscall.SIGTERM)
			if _, err := c.Wait(15 * time.Second); err != nil {
				c.tb.Errorf("%v after SIGTERM; killing it", err)
				c.kill()
			}
		}
		// Workers of a master that died may take a moment to finish.
		WaitUntil(5*time.Second, 20*time.Millisecond, func() error {
			var left []int
			c.masters.Range(func(k, _ any) bool {
				left = append(left, GroupMembers(k.(int))...)
				return true
			})
			if len(left) > 0 {
				return fmt.Errorf("%v", left)
			}
			return nil
		})
		c.masters.Range(func(k, _ any) bool {
			pgid := k.(int)
			if left := GroupMembers(pgid); len(left) > 0 {
				c.tb.Errorf("NGINX processes %v of master %d outlived the controller; killing them", left, pgid)
				syscall.Kill(-pgid, syscall.SIGKILL)
			}
			return true
		})
	})
}

func (c *Controller) kill() {
	if m := c.MasterPID(); m != 0 {
		syscall.Kill(-m, syscall.SIGKILL)
	}
	syscall.Kill(-c.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-c.exited:
	case <-time.After(10 * time.Second):
	}
}

// ClientOptions shape a Controller's HTTP client.
type ClientOptions struct {
	// KeepAlive reuses connections; without it every request opens one.
	KeepAlive bool
	// TLS is the client's TLS configuration for https:// URLs (ServerName
	// is set from the URL's host); nil accepts any certificate, for tests
	// that check the certificate themselves.
	TLS *tls.Config
}

// Client returns an HTTP client for URLs with any host name: it connects
// http:// URLs to HTTPAddr and https:// URLs to HTTPSAddr, so the URL's
// host is the Host header and the TLS server name (SNI). It never follows
// redirects.
func (c *Controller) Client(o ClientOptions) *http.Client {
	tlsConf := o.TLS
	if tlsConf == nil {
		tlsConf = &tls.Config{InsecureSkipVerify: true}
	}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	tr := &http.Transport{
		DisableKeepAlives:  !o.KeepAlive,
		DisableCompression: true,
		TLSClientConfig:    tlsConf,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			_, port, _ := net.SplitHostPort(addr)
			target := c.HTTPAddr
			if port == "443" {
				target = c.HTTPSAddr
			}
			return dialer.DialContext(ctx, network, target)
		},
	}
	c.tb.Cleanup(tr.CloseIdleConnections)
	return &http.Client{
		Transport:     tr,
		Timeout:       15 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// Reply is one answer, read whole.
type Reply struct {
	Status int
	Header http.Header
	Body   string
	TLS    *tls.ConnectionState
}

// Backend is the name of the echo backend that answered (X-Backend), ""
// when NGINX answered itself.
func (r Reply) Backend() string { return r.Header.Get("X-Backend") }

// Echo decodes the echo backend's account of the request.
func (r Reply) Echo() (Echo, error) {
	var e Echo
	if r.Backend() == "" {
		return e, fmt.Errorf("status %d from NGINX itself, not an echo backend: %.200s", r.Status, r.Body)
	}
	err := json.Unmarshal([]byte(r.Body), &e)
	return e, err
}

// Do sends req with hc and reads the whole answer.
func Do(hc *http.Client, req *http.Request) (Reply, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return Reply{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return Reply{}, fmt.Errorf("%s %s: reading the body: %w", req.Method, req.URL, err)
	}
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: string(body), TLS: resp.TLS}, nil
}

// Get is Do for a GET of url.
func Get(hc *http.Client, url string) (Reply, error) {
	req, err := http.NewRequest("GET", url, nil)
	if err != nil {
		return Reply{}, err
	}
	return Do(hc, req)
}

// errStop ends WaitUntil early: waiting longer cannot help.
type errStop struct{ error }

func (e errStop) Unwrap() error { return e.error }

// WaitUntil calls f every interval until it returns nil or timeout has
// passed, and returns nil or f's last error. An error made by StopWaiting
// ends the wait at once; WaitUntil returns it as it is.
func WaitUntil(timeout, interval time.Duration, f func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return nil
		}
		var stop errStop
		if errors.As(err, &stop) {
			return err
		}
		if time.Now().After(deadline) {
			return err
		}
		time.Sleep(interval)
	}
}

// StopWaiting wraps err so that WaitUntil returns it at once.
func StopWaiting(err error) error { return errStop{err} }

// EchoBackend is an HTTP server on a loopback address that answers every
// request with a JSON account of it (Echo), and the headers X-Backend:
// <name> and X-Peer: <ip:port>. A request header X-Echo-Delay (a Go
// duration, at most 10 s) delays the answer.
type EchoBackend struct {
	Name string
	Addr netip.AddrPort
	Zone string

	srv      *http.Server
	requests atomic.Int64
}

// Echo is what an EchoBackend tells of a request.
type Echo struct {
	Backend string      `json:"backend"`
	Peer    string      `json:"peer"`
	Zone    string      `json:"zone"`
	Method  string      `json:"method"`
	URI     string      `json:"uri"` // the request target as received
	Path    string      `json:"path"`
	Query   string      `json:"query"`
	Host    string      `json:"host"`
	Proto   string      `json:"proto"`
	Header  http.Header `json:"header"`
	Body    string      `json:"body"`
}

// StartEchoBackend listens on ip (port chosen by the kernel) and serves
// until the test ends.
func StartEchoBackend(tb testing.TB, name, ip, zone string) *EchoBackend {
	tb.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		tb.Fatalf("echo backend %s on %s: %v", name, ip, err)
	}
	ap := l.Addr().(*net.TCPAddr).AddrPort()
	b := &EchoBackend{Name: name, Addr: netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), Zone: zone}
	peer := b.Addr.String()
	b.srv = &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			b.requests.Add(1)
			if d, err := time.ParseDuration(r.Header.Get("X-Echo-Delay")); err == nil && d > 0 {
				time.Sleep(min(d, 10*time.Second))
			}
			body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
			e := Echo{
				Backend: name, Peer: peer, Zone: zone,
				Method: r.Method, URI: r.RequestURI, Path: r.URL.Path, Query: r.URL.RawQuery,
				Host: r.Host, Proto: r.Proto, Header: r.Header, Body: string(body),
			}
			var out bytes.Buffer
			json.NewEncoder(&out).Encode(e)
			w.Header().Set("X-Backend", name)
			w.Header().Set("X-Peer", peer)
			w.Header().Set("Content-Type", "application/json")
			w.Write(out.Bytes())
		}),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() {
		if err := b.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			tb.Errorf("echo backend %s: %v", name, err)
		}
	}()
	tb.Cleanup(func() { b.srv.Close() })
	return b
}

// IP is the backend's address, Port its port.
func (b *EchoBackend) IP() string   { return b.Addr.Addr().String() }
func (b *EchoBackend) Port() uint16 { return b.Addr.Port() }

// Requests is the number of requests the backend has answered.
func (b *EchoBackend) Requests() int64 { return b.requests.Load() }

// Alive tells whether process pid exists and has not ended: a zombie,
// ended but not yet reaped by its parent, is not alive.
func Alive(pid int) bool {
	state, _, ok := procStat(pid)
	return ok && state != "Z" && state != "X"
}

// GroupMembers lists the live processes (see Alive) of process group
// pgid, sorted.
func GroupMembers(pgid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if state, group, ok := procStat(pid); ok && group == pgid && state != "Z" && state != "X" {
			out = append(out, pid)
		}
	}
	return out
}

// procStat reads a process's state and process group from /proc.
func procStat(pid int) (state string, pgid int, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return "", 0, false
	}
	// pid (comm) state ppid pgrp ...; comm may hold spaces or parentheses.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return "", 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return "", 0, false
	}
	pgid, _ = strconv.Atoi(f[2])
	return f[0], pgid, true
}
