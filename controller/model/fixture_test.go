package model

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"

	core_v1 "k8s.io/api/core/v1"
	discovery_v1 "k8s.io/api/discovery/v1"
	networking_v1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/zonal-ingress/zonal/controller/store"
)

// testOptions are the flags every case runs with unless it says otherwise.
var testOptions = Options{
	IngressClass:    "zonal",
	ControllerClass: "zonal.dev/ingress-controller",
}

// buildCase is one table entry: the cluster as YAML, the flags, and the
// model as dump prints it.
type buildCase struct {
	// opts replaces testOptions when set.
	opts *Options
	// files are testdata fixtures loaded before objs; nil means base.yaml.
	files []string
	// objs are YAML documents, as a user would kubectl apply them.
	objs string
	// want is dump of the model.
	want string
	// says are substrings that problem messages must contain, each in
	// some problem.
	says []string
}

func runCases(t *testing.T, cases map[string]buildCase) {
	t.Helper()
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			files := tc.files
			if files == nil {
				files = []string{"base.yaml"}
			}
			s := snapshot(t, files, tc.objs)
			o := testOptions
			if tc.opts != nil {
				o = *tc.opts
			}
			m := Build(s, o)
			checkModel(t, m)
			if os.Getenv("SHOW_PROBLEMS") != "" {
				t.Logf("problems:\n%s", messages(m))
			}
			if got, want := dump(m), wantDump(tc.want); got != want {
				t.Errorf("model:\n%s\nwant:\n%s", got, want)
			}
			for _, sub := range tc.says {
				found := false
				for _, p := range m.Problems {
					found = found || strings.Contains(p.Message, sub)
				}
				if !found {
					t.Errorf("no problem says %q; problems:\n%s", sub, messages(m))
				}
			}
		})
	}
}

// wantDump is an expected dump as written in a case: indented with the code,
// perhaps pieced together from constants; dump never prints blank lines.
func wantDump(s string) string {
	var sb strings.Builder
	for _, l := range strings.Split(dedent(s), "\n") {
		if l != "" {
			sb.WriteString(l + "\n")
		}
	}
	return sb.String()
}

// checkModel asserts what holds for every model: problems name their object
// and say something, locations name existing backends.
func checkModel(t *testing.T, m *Model) {
	t.Helper()
	for _, p := range m.Problems {
		if p.Kind == "" || p.Name == "" || p.Message == "" {
			t.Errorf("problem without object or message: %+v", p)
		}
	}
	names := map[string]bool{}
	for _, be := range m.Backends {
		names[be.Name] = true
	}
	for _, srv := range m.Servers {
		for _, loc := range srv.Locations {
			if !names[loc.Backend] {
				t.Errorf("server %q location %q names backend %q, which is not in Backends", srv.Host, loc.Path, loc.Backend)
			}
		}
	}
	if m.DefaultBackend != "" && !names[m.DefaultBackend] {
		t.Errorf("default backend %q is not in Backends", m.DefaultBackend)
	}
}

func messages(m *Model) string {
	var sb strings.Builder
	for _, p := range m.Problems {
		fmt.Fprintf(&sb, "  %s %s/%s %s: %s\n", p.Kind, p.Namespace, p.Name, p.Field, p.Message)
	}
	return sb.String()
}

// snapshot loads testdata files and inline YAML into a store snapshot.
func snapshot(t testing.TB, files []string, objs string) *store.Snapshot {
	t.Helper()
	s := store.NewSnapshot()
	for _, f := range files {
		data, err := os.ReadFile("testdata/" + f)
		if err != nil {
			t.Fatal(err)
		}
		addYAML(t, s, string(data))
	}
	addYAML(t, s, dedent(objs))
	return s
}

// addYAML decodes each document of a multi-document YAML text into its typed
// object, as the API server would store it, and files it in s.
func addYAML(t testing.TB, s *store.Snapshot, text string) {
	t.Helper()
	for i, doc := range strings.Split("\n"+text+"\n", "\n---\n") {
		if strings.TrimSpace(stripComments(doc)) == "" {
			continue
		}
		var head struct {
			Kind string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("document %d: %v\n%s", i, err, doc)
		}
		decode := func(into any) {
			if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
				t.Fatalf("document %d (%s): %v\n%s", i, head.Kind, err, doc)
			}
		}
		switch head.Kind {
		case "IngressClass":
			o := &networking_v1.IngressClass{}
			decode(o)
			s.IngressClasses[o.Name] = o
		case "Ingress":
			o := &networking_v1.Ingress{}
			decode(o)
			defaultNamespace(&o.Namespace)
			s.Ingresses[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = o
		case "Service":
			o := &core_v1.Service{}
			decode(o)
			defaultNamespace(&o.Namespace)
			s.Services[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = o
		case "EndpointSlice":
			o := &discovery_v1.EndpointSlice{}
			decode(o)
			defaultNamespace(&o.Namespace)
			svc := types.NamespacedName{Namespace: o.Namespace, Name: o.Labels[discovery_v1.LabelServiceName]}
			if s.EndpointSlices[svc] == nil {
				s.EndpointSlices[svc] = map[string]*discovery_v1.EndpointSlice{}
			}
			s.EndpointSlices[svc][o.Name] = o
		case "Secret":
			o := &core_v1.Secret{}
			decode(o)
			defaultNamespace(&o.Namespace)
			// The API server folds stringData into data.
			for k, v := range o.StringData {
				if o.Data == nil {
					o.Data = map[string][]byte{}
				}
				o.Data[k] = []byte(v)
			}
			o.StringData = nil
			s.Secrets[types.NamespacedName{Namespace: o.Namespace, Name: o.Name}] = o
		case "Node":
			o := &core_v1.Node{}
			decode(o)
			s.Nodes[o.Name] = o
		case "ConfigMap":
			o := &core_v1.ConfigMap{}
			decode(o)
			s.ConfigMap = o
		default:
			t.Fatalf("document %d: kind %q is not one the store holds\n%s", i, head.Kind, doc)
		}
	}
}

func defaultNamespace(ns *string) {
	if *ns == "" {
		*ns = "default"
	}
}

func stripComments(doc string) string {
	var sb strings.Builder
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			sb.WriteString(line + "\n")
		}
	}
	return sb.String()
}

// dedent removes the leading tabs of every line, so that YAML (which never
// indents with tabs) can be indented with the Go code around it.
func dedent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = strings.TrimLeft(l, "\t")
		if strings.TrimSpace(lines[i]) == "" {
			lines[i] = ""
		}
	}
	return strings.Join(lines, "\n")
}

// dump prints a model compactly, one line per server, location, backend,
// endpoint and problem (messages are checked separately), for tests to
// compare.
func dump(m *Model) string {
	var sb strings.Builder
	for _, srv := range m.Servers {
		host := srv.Host
		if host == "" {
			host = `""`
		}
		sb.WriteString("server " + host)
		if srv.TLS != nil {
			sb.WriteString(" tls=" + srv.TLS.Secret.String())
		}
		if srv.SSLRedirect {
			sb.WriteString(" redirect")
		}
		sb.WriteString("\n")
		for _, loc := range srv.Locations {
			kind := " "
			if loc.Exact {
				kind = "= "
			}
			fmt.Fprintf(&sb, "  %s%s -> %s (%s %s)\n", kind, loc.Path, loc.Backend, loc.Ingress, loc.PathType)
		}
	}
	if m.DefaultBackend != "" {
		sb.WriteString("default " + m.DefaultBackend + "\n")
	}
	for _, be := range m.Backends {
		fmt.Fprintf(&sb, "backend %s %s:%s", be.Name, be.Service, be.Port)
		if be.ZoneMode != "" {
			sb.WriteString(" zone-mode=" + be.ZoneMode)
		}
		if be.TrafficDistribution != "" {
			sb.WriteString(" traffic=" + be.TrafficDistribution)
		}
		if be.TopologyMode != "" {
			sb.WriteString(" topology=" + be.TopologyMode)
		}
		sb.WriteString("\n")
		for _, ep := range be.Endpoints {
			sb.WriteString("  " + netip.AddrPortFrom(ep.Address, ep.Port).String())
			if ep.Zone != "" {
				sb.WriteString(" zone=" + ep.Zone)
			}
			if ep.NodeName != "" {
				sb.WriteString(" node=" + ep.NodeName)
			}
			switch {
			case ep.Ready && ep.Serving && !ep.Terminating:
				sb.WriteString(" ready")
			default:
				for _, f := range []struct {
					on   bool
					name string
				}{{ep.Ready, "ready"}, {ep.Serving, "serving"}, {ep.Terminating, "terminating"}} {
					if f.on {
						sb.WriteString(" " + f.name)
					}
				}
			}
			if len(ep.ForZones) > 0 {
				sb.WriteString(" hints=" + strings.Join(ep.ForZones, ","))
			}
			sb.WriteString("\n")
		}
	}
	for _, p := range m.Problems {
		fmt.Fprintf(&sb, "problem %s %s/%s", p.Kind, p.Namespace, p.Name)
		if p.Field != "" {
			sb.WriteString(" " + p.Field)
		}
		sb.WriteString("\n")
	}
	return sb.String()
}
