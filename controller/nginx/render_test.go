package nginx

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/controller/model"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from Render's output")

// goldenDir is the RuntimeDir of the golden files; checking them with
// nginx -t puts a temporary directory in its place.
const goldenDir = "/run/zonal"

func settings() Settings {
	return Settings{RuntimeDir: goldenDir, HTTPPort: 80, HTTPSPort: 443}
}

// tlsFixture is a TLS entry whose content only has to give CertFile a
// stable name; the nginx -t check writes a real certificate at that name.
func tlsFixture(namespace, name string) *model.TLS {
	return &model.TLS{
		Secret: types.NamespacedName{Namespace: namespace, Name: name},
		Cert:   []byte("certificate of " + namespace + "/" + name + "\n"),
		Key:    []byte("key of " + namespace + "/" + name + "\n"),
	}
}

func ing(namespace, name string) types.NamespacedName {
	return types.NamespacedName{Namespace: namespace, Name: name}
}

// exact and prefix are the blocks the model makes of Ingress paths.
func exact(path, backend, ingress, pathType string) model.Location {
	return model.Location{Exact: true, Path: path, Backend: backend, Ingress: ing("default", ingress), PathType: pathType}
}

func prefix(path, backend, ingress, pathType string) model.Location {
	return model.Location{Path: path, Backend: backend, Ingress: ing("default", ingress), PathType: pathType}
}

var renderCases = map[string]struct {
	model    model.Model
	settings func(*Settings)
}{
	// Nothing to serve: the default server answers 404 on both ports and
	// refuses TLS handshakes.
	"default-only": {},

	"hosts": {
		model: model.Model{Servers: []model.Server{
			{Locations: []model.Location{
				prefix("/", "default-web-80", "catch-all", "Prefix"),
			}},
			{Host: "api.example.com", Locations: []model.Location{
				// Prefix /v1 and Exact /health.
				exact("/health", "default-health-http", "api", "Exact"),
				exact("/v1", "default-api-8080", "api", "Prefix"),
				prefix("/v1/", "default-api-8080", "api", "Prefix"),
			}},
			{Host: "www.example.com", Locations: []model.Location{
				// ImplementationSpecific /static: NGINX's own prefix.
				prefix("/static", "default-static-80", "www", "ImplementationSpecific"),
			}},
		}},
		settings: func(s *Settings) {
			s.WorkerProcesses = 4
			s.User = "www-data"
		},
	},

	// A wildcard matches one label: a.example.com, not a.b.example.com;
	// the exact name beside it wins for its host.
	"wildcard": {
		model: model.Model{Servers: []model.Server{
			{Host: "*.example.com", Locations: []model.Location{
				prefix("/", "default-tenant-80", "tenants", "Prefix"),
			}},
			{Host: "admin.example.com", Locations: []model.Location{
				prefix("/", "default-admin-80", "admin", "Prefix"),
			}},
		}},
	},

	"tls-redirect": {
		model: model.Model{Servers: []model.Server{
			{Host: "plain.example.com", Locations: []model.Location{
				prefix("/", "default-plain-80", "plain", "Prefix"),
			}},
			{Host: "secure.example.com", TLS: tlsFixture("default", "secure-tls"), SSLRedirect: true, Locations: []model.Location{
				exact("/app", "default-app-443", "secure", "Prefix"),
				prefix("/app/", "default-app-443", "secure", "Prefix"),
			}},
			{Host: "both.example.com", TLS: tlsFixture("other", "both-tls"), Locations: []model.Location{
				prefix("/", "other-both-http", "both", "Prefix"),
			}},
			{Host: "*.wild.example.com", TLS: tlsFixture("default", "wild-tls"), SSLRedirect: true, Locations: []model.Location{
				prefix("/", "default-wild-80", "wild", "Prefix"),
			}},
		}},
	},

	"default-backend": {
		model: model.Model{
			DefaultBackend: "default-fallback-80",
			Servers: []model.Server{
				// No rule without a host: the default server is made up.
				{Host: "a.example.com", Locations: []model.Location{
					exact("/only", "default-a-80", "a", "Exact"),
				}},
				{Host: "b.example.com", Locations: []model.Location{
					prefix("/", "default-b-80", "b", "Prefix"),
				}},
			},
		},
	},

	// A TLS default server on one IPv6 address.
	"ipv6": {
		model: model.Model{Servers: []model.Server{
			{TLS: tlsFixture("ingress", "default-cert"), Locations: []model.Location{
				prefix("/", "default-web-80", "web", "Prefix"),
			}},
		}},
		settings: func(s *Settings) {
			s.BindAddress = "::1"
			s.HTTPPort, s.HTTPSPort = 8080, 8443
		},
	},

	"dual-stack": {
		settings: func(s *Settings) { s.IPv6 = true },
	},
}

func caseSettings(f func(*Settings)) Settings {
	s := settings()
	if f != nil {
		f(&s)
	}
	return s
}

// TestRenderGolden compares Render's output with testdata/<case>.golden
// (go test -update rewrites them) and has the real NGINX check each one.
func TestRenderGolden(t *testing.T) {
	for name, tc := range renderCases {
		t.Run(name, func(t *testing.T) {
			got, err := Render(&tc.model, caseSettings(tc.settings))
			if err != nil {
				t.Fatal(err)
			}
			again, err := Render(&tc.model, caseSettings(tc.settings))
			if err != nil || string(again) != string(got) {
				t.Fatalf("a second Render gave different output (err %v)", err)
			}
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (go test -update writes it)", err)
			}
			if string(got) != string(want) {
				t.Errorf("Render differs from %s (go test -update rewrites it):\n%s", golden, lineDiff(string(want), string(got)))
			}
			checkWithNginx(t, string(want), &tc.model)
		})
	}
}

// checkWithNginx runs "nginx -t" on golden, moved to a temporary runtime
// directory that holds a real certificate at every name it uses.
func checkWithNginx(t *testing.T, golden string, m *model.Model) {
	t.Helper()
	bin := nginxBinary(t)
	dir := t.TempDir()
	for _, srv := range m.Servers {
		if srv.TLS == nil {
			continue
		}
		rel, err := filepath.Rel(goldenDir, CertFile(goldenDir, srv.TLS))
		if err != nil {
			t.Fatal(err)
		}
		certPEM, keyPEM := selfSigned(t, strings.TrimPrefix(srv.Host, "*."))
		if err := writeCert(filepath.Join(dir, rel), append(certPEM, keyPEM...)); err != nil {
			t.Fatal(err)
		}
	}
	conf := strings.ReplaceAll(golden, goldenDir+"/", dir+"/")
	p := &Process{Binary: bin, RuntimeDir: dir}
	if err := p.Test([]byte(conf)); err != nil {
		t.Fatalf("the real NGINX refuses it: %v", err)
	}
}

// lineDiff shows the first lines where want and got differ.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\nwant %q\ngot  %q", i+1, wl, gl)
		}
	}
	return "(same lines)"
}

// TestRenderRefusesUnsafeStrings: every string from a user is checked
// again at rendering, so that a hole in the model's validation fails
// loudly instead of producing a configuration that means something else.
func TestRenderRefusesUnsafeStrings(t *testing.T) {
	loc := func(path, backend string) []model.Location {
		return []model.Location{{Path: path, Backend: backend, Ingress: ing("default", "x"), PathType: "Prefix"}}
	}
	cases := map[string]struct {
		model    model.Model
		settings func(*Settings)
		want     string
	}{
		"host with a space":       {model: model.Model{Servers: []model.Server{{Host: "a b.com"}}}, want: `"a b.com"`},
		"host ending a directive": {model: model.Model{Servers: []model.Server{{Host: "a.com;user"}}}, want: `"a.com;user"`},
		"host with a quote":       {model: model.Model{Servers: []model.Server{{Host: `a.com"`}}}, want: "a.com"},
		"upper-case host":         {model: model.Model{Servers: []model.Server{{Host: "A.com"}}}, want: `"A.com"`},
		"double wildcard":         {model: model.Model{Servers: []model.Server{{Host: "*.*.com"}}}, want: `"*.*.com"`},
		"inner wildcard":          {model: model.Model{Servers: []model.Server{{Host: "a.*.com"}}}, want: `"a.*.com"`},
		"empty label":             {model: model.Model{Servers: []model.Server{{Host: "a..com"}}}, want: `"a..com"`},
		"relative path":           {model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: loc("x", "b")}}}, want: `"x"`},
		"path with a quote":       {model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: loc(`/a"b`, "b")}}}, want: "/a"},
		"path with a brace":       {model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: loc("/a{", "b")}}}, want: `"/a{"`},
		"path with a variable":    {model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: loc("/$host", "b")}}}, want: `"/$host"`},
		"path with a line break":  {model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: loc("/a\n}", "b")}}}, want: `"/a\n}"`},
		"path with a semicolon":   {model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: loc("/a;", "b")}}}, want: `"/a;"`},
		"path with a backslash":   {model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: loc(`/a\`, "b")}}}, want: `/a\\`},
		"backend with a space":    {model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: loc("/", "b c")}}}, want: `"b c"`},
		"backend with a variable": {model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: loc("/", "$b")}}}, want: `"$b"`},
		"empty backend":           {model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: loc("/", "")}}}, want: "empty name"},
		"default backend":         {model: model.Model{DefaultBackend: "x;y"}, want: `"x;y"`},
		"ingress name with a line break": {
			model: model.Model{Servers: []model.Server{{Host: "a.com", Locations: []model.Location{{Path: "/", Backend: "b", Ingress: ing("default", "x\nuser root;")}}}}},
			want:  "not printable",
		},
		"two servers for a host": {model: model.Model{Servers: []model.Server{{Host: "a.com"}, {Host: "a.com"}}}, want: `two servers for host "a.com"`},
		"runtime directory with a space": {
			settings: func(s *Settings) { s.RuntimeDir = "/run/my zonal" },
			want:     `"/run/my zonal/nginx.pid"`,
		},
		"relative runtime directory": {settings: func(s *Settings) { s.RuntimeDir = "run" }, want: `"run"`},
		"bind address not an IP":     {settings: func(s *Settings) { s.BindAddress = "localhost" }, want: `"localhost"`},
		"same ports":                 {settings: func(s *Settings) { s.HTTPSPort = 80 }, want: "both 80"},
		"user with a directive":      {settings: func(s *Settings) { s.User = "root; daemon on" }, want: "root;"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			out, err := Render(&tc.model, caseSettings(tc.settings))
			if err == nil {
				t.Fatalf("Render succeeded:\n%s", out)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not mention %s", err, tc.want)
			}
		})
	}
}

// TestRenderManyHosts: thousands of hosts, with the longest name DNS
// allows, load without NGINX asking for bigger server names hashes.
func TestRenderManyHosts(t *testing.T) {
	bin := nginxBinary(t)
	label := strings.Repeat("x", 63)
	longest := strings.Join([]string{label, label, label, label[:61]}, ".") // 253 bytes
	m := &model.Model{DefaultBackend: "default-web-80"}
	for i := range 5000 {
		m.Servers = append(m.Servers, model.Server{Host: fmt.Sprintf("host-%d.tenant-%d.example.com", i, i%97)})
	}
	m.Servers = append(m.Servers, model.Server{Host: longest})
	dir := t.TempDir()
	s := Settings{RuntimeDir: dir, HTTPPort: 80, HTTPSPort: 443}
	conf, err := Render(m, s)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.ConfFile(), conf, 0o644); err != nil {
		t.Fatal(err)
	}
	// Without -q, to see warnings too.
	out, err := exec.Command(bin, "-t", "-p", dir+"/", "-c", s.ConfFile()).CombinedOutput()
	if err != nil || strings.Contains(string(out), "[warn]") {
		t.Fatalf("nginx -t: %v\n%s", err, out)
	}
}

// BenchmarkRender renders 5,000 hosts with three locations each, a tenth
// of them with TLS.
func BenchmarkRender(b *testing.B) {
	m := &model.Model{DefaultBackend: "default-web-80"}
	for i := range 5000 {
		srv := model.Server{Host: fmt.Sprintf("host-%d.example.com", i), Locations: []model.Location{
			exact("/api", "default-api-80", "ing", "Prefix"),
			prefix("/api/", "default-api-80", "ing", "Prefix"),
			prefix("/", "default-web-80", "ing", "Prefix"),
		}}
		if i%10 == 0 {
			srv.TLS = tlsFixture("default", fmt.Sprintf("tls-%d", i))
		}
		m.Servers = append(m.Servers, srv)
	}
	s := settings()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Render(m, s); err != nil {
			b.Fatal(err)
		}
	}
}
