package nginx

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/controller/model"
)

func TestWriteAndPruneCerts(t *testing.T) {
	dir := t.TempDir()
	a := tlsFixture("default", "a-tls")
	b := tlsFixture("other", "b-tls")
	m := &model.Model{Servers: []model.Server{
		{Host: "a.example.com", TLS: a},
		{Host: "a2.example.com", TLS: a}, // one Secret, two hosts: one file
		{Host: "b.example.com", TLS: b},
		{Host: "plain.example.com"},
	}}
	files, err := WriteCerts(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 2 || files[a.Secret] != CertFile(dir, a) || files[b.Secret] != CertFile(dir, b) {
		t.Fatalf("WriteCerts = %v", files)
	}
	got, err := os.ReadFile(files[a.Secret])
	if err != nil || string(got) != string(a.Cert)+string(a.Key) {
		t.Fatalf("%s holds %q (%v), want the chain then the key", files[a.Secret], got, err)
	}
	st, err := os.Stat(files[a.Secret])
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("%s: mode %v (%v), want 0600", files[a.Secret], st.Mode(), err)
	}
	if st, err := os.Stat(filepath.Join(dir, "certs")); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("certs directory: %v (%v), want 0700", st.Mode(), err)
	}

	// A renewed certificate gets a new name; the old file stays until
	// PruneCerts, as the running NGINX may still need it.
	renewed := &model.TLS{Secret: a.Secret, Cert: []byte("renewed\n"), Key: a.Key}
	m.Servers = []model.Server{{Host: "a.example.com", TLS: renewed}}
	files2, err := WriteCerts(dir, m)
	if err != nil {
		t.Fatal(err)
	}
	if files2[a.Secret] == files[a.Secret] {
		t.Fatal("a renewed certificate kept its file name")
	}
	if got := certFiles(t, dir); len(got) != 3 {
		t.Fatalf("before pruning: %v, want 3 files", got)
	}
	if err := PruneCerts(dir, files2); err != nil {
		t.Fatal(err)
	}
	if got := certFiles(t, dir); !slices.Equal(got, []string{filepath.Base(files2[a.Secret])}) {
		t.Fatalf("after pruning: %v, want only %s", got, files2[a.Secret])
	}

	// Names that could not come from Kubernetes are refused.
	bad := &model.TLS{Secret: types.NamespacedName{Namespace: "..", Name: "x/../../y"}}
	if _, err := WriteCerts(dir, &model.Model{Servers: []model.Server{{Host: "x.com", TLS: bad}}}); err == nil ||
		!strings.Contains(err.Error(), "not a Kubernetes namespace and name") {
		t.Fatalf("WriteCerts with a bad secret name: %v", err)
	}
}

func certFiles(t *testing.T, dir string) []string {
	entries, err := os.ReadDir(filepath.Join(dir, "certs"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
