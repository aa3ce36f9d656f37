// Package controller tests the zonal controller end to end: the real
// bin/zonal in local mode as a child process, reading manifests that the
// tests write into a temporary directory, running the real bin/nginx on
// free loopback ports, proxying to Go echo backends on 127.0.0.x. The
// tests check what a user would see: routing, certificates, redirects,
// which changes reload NGINX and which do not, how broken input is
// handled, and a clean shutdown.
//
// They need bin/zonal and bin/nginx (make build) and fail without them,
// unless -short is given.
package controller

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net/http"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/test/harness"
)

// changeTimeout bounds the wait for a manifest edit to be served: local
// mode reads the files every 0.5 s once they have settled for 0.1 s, and
// a reload waits for --reload-min-interval (1 s) after the last one.
const changeTimeout = 5 * time.Second

// ingressClass is the IngressClass every test's manifests start with.
const ingressClass = `apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: zonal
spec:
  controller: zonal.dev/ingress-controller
`

// service is a Service "name" in namespace ns with port 80 named http, and
// one EndpointSlice per backend (the backends listen on different ports,
// and a slice has one port list), as the EndpointSlice controller might
// write them.
func service(ns, name string, backends ...*harness.EchoBackend) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: %s
spec:
  selector:
    app: %s
  ports:
  - name: http
    port: 80
    targetPort: 8080
`, name, ns, name)
	for i, be := range backends {
		b.WriteString("---\n")
		b.WriteString(slice(ns, fmt.Sprintf("%s-%d", name, i), name, be))
	}
	return b.String()
}

// slice is an EndpointSlice of Service svc with one ready endpoint per
// backend; every backend must listen on the same port.
func slice(ns, name, svc string, backends ...*harness.EchoBackend) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: %s
  labels:
    kubernetes.io/service-name: %s
addressType: IPv4
ports:
- name: http
  port: %d
endpoints:
`, name, ns, svc, backends[0].Port())
	for _, be := range backends {
		if be.Port() != backends[0].Port() {
			panic("slice: backends on different ports")
		}
		fmt.Fprintf(&b, "- addresses: [%q]\n  conditions: {ready: true}\n  zone: %s\n", be.IP(), be.Zone)
	}
	return b.String()
}

// docs joins YAML documents into one file.
func docs(ds ...string) string { return strings.Join(ds, "---\n") }

// manifests are the files of a manifests directory, by name.
type manifests map[string]string

// start starts the controller on files with extra flags.
func start(t *testing.T, args []string, files manifests) *harness.Controller {
	t.Helper()
	return harness.StartController(t, harness.ControllerConfig{Manifests: files, Args: args})
}

// backends starts echo backends named names on 127.0.0.<first>, <first+1>...
func backends(t *testing.T, first int, names ...string) map[string]*harness.EchoBackend {
	t.Helper()
	m := map[string]*harness.EchoBackend{}
	for i, name := range names {
		m[name] = harness.StartEchoBackend(t, name, fmt.Sprintf("127.0.0.%d", first+i), "zone-a")
	}
	return m
}

// get requests url and fails the test on a transport error.
func get(t *testing.T, hc *http.Client, url string) harness.Reply {
	t.Helper()
	r, err := harness.Get(hc, url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return r
}

// describe says who answered, for failure messages.
func describe(r harness.Reply) string {
	if r.Backend() != "" {
		return fmt.Sprintf("%d from backend %s", r.Status, r.Backend())
	}
	return fmt.Sprintf("%d from NGINX", r.Status)
}

// waitBackend waits until GET url is answered by backend want, and
// returns how long that took.
func waitBackend(t *testing.T, hc *http.Client, url, want string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	var last string
	err := harness.WaitUntil(timeout, 10*time.Millisecond, func() error {
		r, err := harness.Get(hc, url)
		switch {
		case err != nil:
			last = err.Error()
		case r.Backend() == want && r.Status == http.StatusOK:
			return nil
		default:
			last = describe(r)
		}
		return errors.New(last)
	})
	if err != nil {
		t.Fatalf("GET %s not answered by %s within %v; last: %s", url, want, timeout, last)
	}
	return time.Since(start)
}

// expectRoute checks that GET url is answered by backend want, or by NGINX
// with 404 when want is "".
func expectRoute(t *testing.T, hc *http.Client, url, want string) {
	t.Helper()
	r, err := harness.Get(hc, url)
	switch {
	case err != nil:
		t.Errorf("GET %s: %v", url, err)
	case want == "" && (r.Status != http.StatusNotFound || r.Backend() != ""):
		t.Errorf("GET %s: %s, want 404 from NGINX", url, describe(r))
	case want != "" && (r.Status != http.StatusOK || r.Backend() != want):
		t.Errorf("GET %s: %s, want 200 from backend %s", url, describe(r), want)
	}
}

// reloadLines are the log lines that tell of an NGINX reload.
var reloadLines = regexp.MustCompile(`(?i)reload|reconfiguring|SIGHUP`)

// nginxState is what a reload changes, or must not.
type nginxState struct {
	master  int
	workers []int
	confMod time.Time
	conf    string
	logOff  int64
}

func snapshot(t *testing.T, c *harness.Controller) nginxState {
	t.Helper()
	st, err := os.Stat(c.ConfFile())
	if err != nil {
		t.Fatal(err)
	}
	conf, err := os.ReadFile(c.ConfFile())
	if err != nil {
		t.Fatal(err)
	}
	s := nginxState{master: c.MasterPID(), workers: c.WorkerPIDs(), confMod: st.ModTime(), conf: string(conf), logOff: c.LogSize()}
	if s.master == 0 || len(s.workers) != c.Workers {
		t.Fatalf("NGINX master %d with workers %v, want a master with %d workers", s.master, s.workers, c.Workers)
	}
	return s
}

// expectNoReload fails the test if NGINX was reloaded since before.
func expectNoReload(t *testing.T, c *harness.Controller, before nginxState) {
	t.Helper()
	after := snapshot(t, c)
	if after.master != before.master {
		t.Errorf("NGINX master changed from %d to %d", before.master, after.master)
	}
	if !slices.Equal(after.workers, before.workers) {
		t.Errorf("NGINX workers changed from %v to %v: a reload", before.workers, after.workers)
	}
	if !after.confMod.Equal(before.confMod) || after.conf != before.conf {
		t.Errorf("%s was rewritten (modified %v, before %v)", c.ConfFile(), after.confMod, before.confMod)
	}
	if lines := harness.Grep(c.LogSince(before.logOff), ""); len(lines) > 0 {
		for _, l := range lines {
			if reloadLines.MatchString(l) {
				t.Errorf("the controller's log tells of a reload: %s", l)
			}
		}
	}
}

// waitReloaded waits until NGINX runs only new workers: none of old is
// left. Right after a reload the old workers still accept connections for
// about 100 ms (the master starts the new ones, sleeps 100 ms, and only
// then tells the old ones to stop), so a request may still meet the old
// configuration after the first one met the new.
func waitReloaded(t *testing.T, c *harness.Controller, old []int) []int {
	t.Helper()
	var workers []int
	err := harness.WaitUntil(10*time.Second, 20*time.Millisecond, func() error {
		workers = c.WorkerPIDs()
		for _, w := range workers {
			if slices.Contains(old, w) {
				return fmt.Errorf("old worker %d still running (workers %v)", w, workers)
			}
		}
		if len(workers) != c.Workers {
			return fmt.Errorf("workers %v", workers)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("after the reload: %v; workers before: %v", err, old)
	}
	return workers
}

// load sends GETs of url from clients goroutines until stopped, and
// counts the answers that were not 200 from one of the wanted backends.
type load struct {
	stop     chan struct{}
	wg       sync.WaitGroup
	sent     atomic.Int64
	mu       sync.Mutex
	failures []string
	failed   int
	byBack   map[string]int
}

func startLoad(c *harness.Controller, url string, clients int, keepAlive bool, ok func(backend string) bool) *load {
	l := &load{stop: make(chan struct{}), byBack: map[string]int{}}
	for range clients {
		hc := c.Client(harness.ClientOptions{KeepAlive: keepAlive})
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				r, err := harness.Get(hc, url)
				l.sent.Add(1)
				l.mu.Lock()
				switch {
				case err != nil:
					l.fail(err.Error())
				case r.Status != http.StatusOK || !ok(r.Backend()):
					l.fail(describe(r))
				default:
					l.byBack[r.Backend()]++
				}
				l.mu.Unlock()
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	return l
}

func (l *load) fail(msg string) {
	l.failed++
	if len(l.failures) < 10 {
		l.failures = append(l.failures, msg)
	}
}

// finish stops the load and fails the test if any request failed.
func (l *load) finish(t *testing.T, what string) {
	t.Helper()
	close(l.stop)
	l.wg.Wait()
	t.Logf("%s: %d requests, by backend %v", what, l.sent.Load(), l.byBack)
	if l.failed > 0 {
		t.Errorf("%s: %d of %d requests failed; first failures:\n%s", what, l.failed, l.sent.Load(), strings.Join(l.failures, "\n"))
	}
}

// selfSigned returns a self-signed ECDSA certificate for host and its key,
// PEM-encoded, and the parsed certificate.
func selfSigned(t *testing.T, host string) (certPEM, keyPEM []byte, cert *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: host},
		DNSNames:              []string{host},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err = x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), cert
}

// tlsSecret is a kubernetes.io/tls Secret as `kubectl create secret tls`
// writes it.
func tlsSecret(ns, name string, certPEM, keyPEM []byte) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Secret
metadata:
  name: %s
  namespace: %s
type: kubernetes.io/tls
data:
  tls.crt: %s
  tls.key: %s
`, name, ns, base64.StdEncoding.EncodeToString(certPEM), base64.StdEncoding.EncodeToString(keyPEM))
}
