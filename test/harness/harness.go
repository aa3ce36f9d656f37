// Package harness runs the real NGINX with the zonal module on loopback for
// end-to-end tests and benchmarks: it finds bin/nginx, writes an nginx.conf
// from a template into a fresh directory, starts NGINX as a child (a master
// and its workers) and stops it gracefully when the test ends, starts small
// Go HTTP backends that answer with their own identity, and publishes
// endpoint tables with the controller's own writer (cgo/table).
//
// Everything listens on 127.0.0.0/8 (and ::1) only, on ports chosen free at
// run time, so that tests may run in parallel and beside other tests on a
// shared machine.
package harness

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// modulePath is the Go module whose root holds bin/nginx.
const modulePath = "github.com/zonal-ingress/zonal"

// MissingNginx is the message a test fails (or, with -short, skips) with
// when there is no NGINX binary to test.
const MissingNginx = "bin/nginx missing: run make nginx"

// RepoRoot returns the repository root: the nearest directory at or above
// the working directory whose go.mod declares this module. Tests run in
// their package's directory, so this finds the checkout they belong to.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("repository root: %w", err)
	}
	want := []byte("module " + modulePath + "\n")
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && (bytes.HasPrefix(b, want) || bytes.Contains(b, append([]byte("\n"), want...))) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("repository root: no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

// NginxPath returns the NGINX binary to test: $ZONAL_NGINX if set, else
// bin/nginx in the repository. A missing binary fails the test with
// MissingNginx, or skips it when -short is given, so that a plain `go test`
// on a machine without the custom build never passes by testing nothing.
func NginxPath(tb testing.TB) string {
	tb.Helper()
	path := os.Getenv("ZONAL_NGINX")
	if path == "" {
		root, err := RepoRoot()
		if err != nil {
			tb.Fatal(err)
		}
		path = filepath.Join(root, "bin", "nginx")
	}
	if st, err := os.Stat(path); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
		if testing.Short() {
			tb.Skip(MissingNginx)
		}
		tb.Fatalf("%s (looked for %s)", MissingNginx, path)
	}
	return path
}

// reserved remembers every port this process handed out, so that two NGINX
// instances of one test binary never get the same one.
var reserved struct {
	sync.Mutex
	ports map[int]bool
}

// FreePort returns a TCP port on ip that was free a moment ago: it binds
// ip:0 and closes the socket. Another process may take the port before the
// caller binds it, so callers retry on "address already in use".
func FreePort(ip string) (int, error) {
	reserved.Lock()
	defer reserved.Unlock()
	if reserved.ports == nil {
		reserved.ports = make(map[int]bool)
	}
	for range 100 {
		l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
		if err != nil {
			return 0, fmt.Errorf("finding a free port on %s: %w", ip, err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if !reserved.ports[port] {
			reserved.ports[port] = true
			return port, nil
		}
	}
	return 0, fmt.Errorf("finding a free port on %s: every port offered was already handed out", ip)
}

func token() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}
