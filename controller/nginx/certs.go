package nginx

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/controller/model"
)

// CertFile is where WriteCerts puts the certificate chain and key of tls,
// and what Render names in ssl_certificate and ssl_certificate_key:
// <runtimeDir>/certs/<namespace>_<name>_<hash>.pem. The hash of the content
// gives a renewed certificate a new name, so the configuration changes
// and NGINX reloads it, and the files a running NGINX may still need are
// never overwritten.
func CertFile(runtimeDir string, tls *model.TLS) string {
	return filepath.Join(runtimeDir, certsName, tls.Secret.Namespace+"_"+tls.Secret.Name+"_"+certHash(tls)+".pem")
}

func certHash(tls *model.TLS) string {
	h := sha256.New()
	h.Write(certContent(tls))
	return hex.EncodeToString(h.Sum(nil)[:8])
}

// certContent is the file: the chain, then the key. NGINX reads both
// directives' PEM blocks from one file, skipping the blocks of the other
// kind.
func certContent(tls *model.TLS) []byte {
	var b bytes.Buffer
	b.Write(tls.Cert)
	if len(tls.Cert) > 0 && !bytes.HasSuffix(tls.Cert, []byte("\n")) {
		b.WriteByte('\n')
	}
	b.Write(tls.Key)
	return b.Bytes()
}

// WriteCerts writes a file for each TLS secret of m's servers, at
// CertFile, and returns them by Secret. Files are written atomically
// (a temporary file renamed into place), readable by the owner only (mode
// 0600 in a 0700 directory): the NGINX master reads certificates when it
// loads the configuration, before it starts the workers, so the workers
// need no access even when they run as another user. A file that is
// already in place is left alone.
func WriteCerts(runtimeDir string, m *model.Model) (map[types.NamespacedName]string, error) {
	files := map[types.NamespacedName]string{}
	for i := range m.Servers {
		tls := m.Servers[i].TLS
		if tls == nil {
			continue
		}
		if err := checkSecretName(tls.Secret); err != nil {
			return nil, err
		}
		path := CertFile(runtimeDir, tls)
		if prev, ok := files[tls.Secret]; ok {
			if prev != path {
				return nil, fmt.Errorf("secret %s: two different contents in one model", tls.Secret)
			}
			continue
		}
		if err := writeCert(path, certContent(tls)); err != nil {
			return nil, fmt.Errorf("secret %s: %w", tls.Secret, err)
		}
		files[tls.Secret] = path
	}
	return files, nil
}

func writeCert(path string, content []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return writeFileAtomic(path, content, 0o600)
}

// checkSecretName refuses names that could not come from Kubernetes (DNS
// labels and subdomains), which would make the file name ambiguous or
// escape the directory.
func checkSecretName(n types.NamespacedName) error {
	for _, s := range []string{n.Namespace, n.Name} {
		bad := strings.ContainsFunc(s, func(r rune) bool {
			return (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' && r != '.'
		})
		if s == "" || bad || s[0] == '.' {
			return fmt.Errorf("secret %q: not a Kubernetes namespace and name", n.String())
		}
	}
	return nil
}

// PruneCerts removes the certificate files under runtimeDir that keep does
// not list (and leftovers of interrupted writes). Call it with WriteCerts'
// result after NGINX has loaded a configuration that uses only those, so
// that a restarted master never misses a file its configuration names.
func PruneCerts(runtimeDir string, keep map[types.NamespacedName]string) error {
	dir := filepath.Join(runtimeDir, certsName)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	wanted := make(map[string]bool, len(keep))
	for _, f := range keep {
		wanted[filepath.Clean(f)] = true
	}
	var errs []error
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if e.IsDir() || wanted[path] {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
