package nginx

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// missingNginx is the message a test fails (or, with -short, skips) with
// when bin/nginx is not built.
const missingNginx = "bin/nginx missing: run make nginx"

// repoRoot is the nearest directory above the working directory whose
// go.mod declares this module.
func repoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(b, []byte("module github.com/zonal-ingress/zonal\n")) {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod of github.com/zonal-ingress/zonal above the working directory")
		}
		dir = parent
	}
}

// nginxBinary is bin/nginx of this checkout. A missing binary fails the
// test, so that a plain "go test" never passes by testing nothing; -short
// skips instead.
func nginxBinary(t testing.TB) string {
	t.Helper()
	path := filepath.Join(repoRoot(t), "bin", "nginx")
	if isExecutable(path) != nil {
		if testing.Short() {
			t.Skip(missingNginx)
		}
		t.Fatalf("%s (looked for %s)", missingNginx, path)
	}
	return path
}

// testUser is Settings.User for tests. NGINX started by root runs its
// workers as "nobody", who cannot enter the 0700 directories of
// t.TempDir() (the endpoint table, the temporary files): as root the tests
// keep the workers root. In production the container runs as non-root and
// the workers run as the controller's own user.
func testUser() string {
	if os.Geteuid() == 0 {
		return "root"
	}
	return ""
}

// freePort returns a TCP port on 127.0.0.1 that nothing listens on now.
func freePort(t testing.TB) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// selfSigned returns a PEM certificate for hosts (a CA of its own, so that
// a client can trust it) and its PEM key.
func selfSigned(t testing.TB, hosts ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "zonal test"},
		DNSNames:              hosts,
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kb})
}
