// Package nginx runs the data plane's NGINX for the controller: Render turns
// a model into nginx.conf, WriteCerts writes the certificates it names, and
// Process supervises the NGINX master as a child: start, test, apply a new
// configuration by reload, restart after a crash, graceful stop.
package nginx

import (
	"bytes"
	"fmt"
	"net/netip"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/zonal-ingress/zonal/conf"
	"github.com/zonal-ingress/zonal/controller/model"
)

// Files and directories in Settings.RuntimeDir.
const (
	confName       = "nginx.conf"
	pidName        = "nginx.pid"
	tableName      = "table"
	certsName      = "certs"
	clientBodyName = "client_body_temp"
	proxyTempName  = "proxy_temp"
	statusSockName = "status.sock"
)

// maxSocketPath is the longest path a unix socket may have on Linux
// (sun_path holds 108 bytes with the terminating NUL).
const maxSocketPath = 107

// Settings are the parts of nginx.conf that come from the controller's
// flags rather than from the cluster.
type Settings struct {
	// RuntimeDir is an absolute directory that holds nginx.conf, the pid
	// file, the endpoint table (TableDir), the certificates (certs/) and
	// NGINX's temporary files. It is NGINX's prefix (-p).
	RuntimeDir string
	// BindAddress is the IP address to listen on; "" for every IPv4
	// address (and every IPv6 one with IPv6).
	BindAddress string
	// IPv6 adds a listener on [::] when BindAddress is "". Leave it off
	// where the kernel has IPv6 disabled: NGINX could not start.
	IPv6 bool
	// HTTPPort and HTTPSPort are the ports for plain HTTP and for TLS.
	HTTPPort, HTTPSPort int
	// WorkerProcesses is worker_processes; 0 means one per CPU ("auto").
	WorkerProcesses int
	// User is the "user" directive ("name" or "name group"), emitted only
	// if not empty. It matters only when the master runs as root.
	User string
}

// TableDir is the endpoint table directory that nginx.conf names: the
// controller publishes there, the workers read it.
func (s Settings) TableDir() string { return filepath.Join(s.RuntimeDir, tableName) }

// ConfFile is the nginx.conf that Process runs.
func (s Settings) ConfFile() string { return filepath.Join(s.RuntimeDir, confName) }

// StatusSocket is the unix socket on which nginx.conf serves the zonal
// module's counters at /zonal/status, for the controller's metrics. A unix
// socket rather than a loopback port: nothing else in the pod's network
// namespace can reach it, and it takes no port.
func (s Settings) StatusSocket() string { return filepath.Join(s.RuntimeDir, statusSockName) }

func (s Settings) check() error {
	if !filepath.IsAbs(s.RuntimeDir) || filepath.Clean(s.RuntimeDir) != s.RuntimeDir {
		return fmt.Errorf("runtime directory %q is not a clean absolute path", s.RuntimeDir)
	}
	for _, p := range []struct {
		name string
		port int
	}{{"HTTP", s.HTTPPort}, {"HTTPS", s.HTTPSPort}} {
		if p.port < 1 || p.port > 65535 {
			return fmt.Errorf("%s port %d is out of range 1-65535", p.name, p.port)
		}
	}
	if s.HTTPPort == s.HTTPSPort {
		return fmt.Errorf("HTTP and HTTPS port are both %d", s.HTTPPort)
	}
	if n := len(s.StatusSocket()); n > maxSocketPath {
		return fmt.Errorf("runtime directory %q is too long: the status socket %s would have %d bytes, "+
			"a unix socket at most %d; choose a shorter one", s.RuntimeDir, statusSockName, n, maxSocketPath)
	}
	if s.WorkerProcesses < 0 {
		return fmt.Errorf("worker processes %d is negative", s.WorkerProcesses)
	}
	if s.BindAddress != "" {
		a, err := netip.ParseAddr(s.BindAddress)
		if err != nil || a.Zone() != "" {
			return fmt.Errorf("bind address %q is not an IP address without a zone", s.BindAddress)
		}
	}
	return nil
}

// listen returns the arguments of the listen directives for port.
func (s Settings) listen(port int, opts string) []string {
	p := strconv.Itoa(port)
	if s.BindAddress == "" {
		out := []string{p + opts}
		if s.IPv6 {
			out = append(out, "[::]:"+p+opts)
		}
		return out
	}
	a := netip.MustParseAddr(s.BindAddress) // checked
	if a.Is4In6() {
		a = a.Unmap()
	}
	return []string{netip.AddrPortFrom(a, uint16(port)).String() + opts}
}

// confData is what conf.NginxConf sees.
type confData struct {
	User            string
	WorkerProcesses string
	PIDFile         string
	TableDir        string
	ClientBodyTemp  string
	ProxyTemp       string
	// Server names hash sizes: see hashSizes.
	ServerNamesHashMaxSize    int
	ServerNamesHashBucketSize int
	DefaultBackend            string
	Servers                   []confServer
	// Proxying is true when some location proxies: only then may the
	// configuration name $zonal_backend.
	Proxying bool

	// StatusListen is the status server's listen argument: one, built
	// here as the ports' are, since "unix:" goes inside the quotes (NGINX
	// reads a quote only at the start of an argument).
	StatusListen []string
}

// confServer is one server block.
type confServer struct {
	Comment string
	Listen  []string
	Host    string // "" in the default server
	// CertFile holds the certificate chain and the key.
	CertFile string
	// RejectTLS refuses TLS handshakes: the default server without a
	// certificate on the HTTPS port.
	RejectTLS bool
	// Redirect answers every request with a redirect to HTTPS, on
	// RedirectPort (0 for 443, which URLs leave out).
	Redirect     bool
	RedirectPort int
	Locations    []confLocation
	// CatchAll adds "location /" for the default backend (or 404).
	CatchAll bool
}

type confLocation struct {
	Comment string
	Exact   bool
	Path    string
	Backend string
}

// Render returns nginx.conf for m. The output depends only on m and s, so
// an unchanged model gives identical bytes and needs no reload.
//
// Every server of m gets a server block; the server with Host "" is the
// default server on both ports (one is made up if m has none), and refuses
// TLS handshakes when it has no certificate. A wildcard host matches
// exactly one DNS label. A TLS server listens on both ports, unless it
// redirects plain HTTP: then a second block on the HTTP port only answers
// 308. A server without the prefix location "/" gets one that proxies to
// m.DefaultBackend, or answers 404 when there is none.
//
// Certificates are named by CertFile, where WriteCerts puts them. Hosts,
// paths and backend names are checked again (see conf.Funcs); Render fails
// on one that is not safe rather than emit a configuration that NGINX
// would read differently.
func Render(m *model.Model, s Settings) ([]byte, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("nginx settings: %w", err)
	}
	d := confData{
		User:            s.User,
		WorkerProcesses: "auto",
		PIDFile:         filepath.Join(s.RuntimeDir, pidName),
		TableDir:        s.TableDir(),
		ClientBodyTemp:  filepath.Join(s.RuntimeDir, clientBodyName),
		ProxyTemp:       filepath.Join(s.RuntimeDir, proxyTempName),
		DefaultBackend:  m.DefaultBackend,
		StatusListen:    []string{`"unix:` + s.StatusSocket() + `"`},
	}
	if s.WorkerProcesses > 0 {
		d.WorkerProcesses = strconv.Itoa(s.WorkerProcesses)
	}

	seen := make(map[string]bool, len(m.Servers))
	var names []string // exact server names, for the hash sizes
	for i := range m.Servers {
		srv := &m.Servers[i]
		if seen[srv.Host] {
			return nil, fmt.Errorf("two servers for host %q", srv.Host)
		}
		seen[srv.Host] = true
		if srv.Host != "" && !strings.HasPrefix(srv.Host, "*.") {
			names = append(names, srv.Host)
		}
		d.Servers = append(d.Servers, serverBlocks(srv, s)...)
	}
	if !seen[""] {
		// Without it the first server on each port would answer for
		// every unknown host.
		d.Servers = append(serverBlocks(&model.Server{}, s), d.Servers...)
	}
	d.ServerNamesHashMaxSize, d.ServerNamesHashBucketSize = hashSizes(names)
	d.Proxying = m.DefaultBackend != "" || slices.ContainsFunc(m.Servers, func(s model.Server) bool {
		return len(s.Locations) > 0
	})

	var b bytes.Buffer
	if err := conf.NginxConf().Execute(&b, d); err != nil {
		return nil, fmt.Errorf("rendering nginx.conf: %w", err)
	}
	// The socket's name is checked as every file's is. The template has
	// checked the runtime directory's other files already, and its error
	// names the first one.
	if _, err := conf.File(s.StatusSocket()); err != nil {
		return nil, fmt.Errorf("rendering nginx.conf: status socket: %w", err)
	}
	return b.Bytes(), nil
}

// serverBlocks returns the server blocks of srv.
func serverBlocks(srv *model.Server, s Settings) []confServer {
	var flags, name string
	if srv.Host == "" {
		flags = " default_server"
		name = "the default server: for hosts no other server names"
	} else {
		name = "host " + srv.Host
	}
	httpListen := s.listen(s.HTTPPort, flags)
	httpsListen := s.listen(s.HTTPSPort, " ssl"+flags)

	b := confServer{
		Comment:  name,
		Host:     srv.Host,
		CatchAll: true,
	}
	for _, l := range srv.Locations {
		if !l.Exact && l.Path == "/" {
			b.CatchAll = false
		}
		b.Locations = append(b.Locations, confLocation{
			Comment: locationComment(l),
			Exact:   l.Exact,
			Path:    l.Path,
			Backend: l.Backend,
		})
	}

	switch {
	case srv.TLS != nil && srv.SSLRedirect:
		// A block of its own rather than `if ($scheme = http)`: the
		// HTTPS server then evaluates nothing per request, and the
		// file reads as what it does.
		redirect := confServer{
			Comment:  name + ", plain HTTP: redirect to HTTPS",
			Listen:   httpListen,
			Host:     srv.Host,
			Redirect: true,
		}
		if s.HTTPSPort != 443 {
			redirect.RedirectPort = s.HTTPSPort
		}
		b.Comment = name + ", HTTPS"
		b.Listen = httpsListen
		b.CertFile = CertFile(s.RuntimeDir, srv.TLS)
		return []confServer{redirect, b}
	case srv.TLS != nil:
		b.Listen = slices.Concat(httpListen, httpsListen)
		b.CertFile = CertFile(s.RuntimeDir, srv.TLS)
	case srv.Host == "":
		// Hosts without a certificate have no HTTPS server: their TLS
		// handshakes end here, without a certificate for another host.
		b.Listen = slices.Concat(httpListen, httpsListen)
		b.RejectTLS = true
	default:
		b.Listen = httpListen
	}
	return []confServer{b}
}

// locationComment names where a location came from, for the operator who
// reads nginx.conf or an "nginx -t" error that points at a line.
func locationComment(l model.Location) string {
	if l.Ingress.Name == "" {
		return ""
	}
	c := "ingress " + l.Ingress.String()
	if l.PathType != "" {
		c += ", " + l.PathType
	}
	return c
}

// hashSizes returns server_names_hash_max_size and _bucket_size for the
// exact server names (wildcards are regexes, not in the hash). NGINX builds
// one hash per listening port and fails to start if a bucket cannot hold
// the longest name; with too few buckets it only warns and wastes memory.
// So the bucket is sized for the longest name (253 bytes need 512), and
// the table may have four slots per name.
func hashSizes(names []string) (maxSize, bucketSize int) {
	const ptr = 8 // sizeof(void *)
	longest := 0
	for _, n := range names {
		longest = max(longest, len(n))
	}
	// NGX_HASH_ELT_SIZE plus the bucket's terminating pointer.
	need := ptr + (longest+2+ptr-1)/ptr*ptr + ptr
	bucketSize = 128
	for bucketSize < need {
		bucketSize *= 2
	}
	maxSize = 1024
	for maxSize < 4*len(names) {
		maxSize *= 2
	}
	return maxSize, bucketSize
}
