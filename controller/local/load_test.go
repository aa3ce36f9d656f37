package local

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	core_v1 "k8s.io/api/core/v1"
	discovery_v1 "k8s.io/api/discovery/v1"
	networking_v1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// writeFiles writes name → content into dir.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const ingressYAML = `# The shop's entry point.
---
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata:
  name: zonal
  namespace: ignored   # cluster-scoped
spec:
  controller: zonal.dev/ingress-controller
---
# nothing but a comment
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: web
spec:
  ingressClassName: zonal
  rules:
  - host: shop.example
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: web
            port:
              name: http
---
`

const listYAML = `apiVersion: v1
kind: List
items:
- apiVersion: v1
  kind: Service
  metadata:
    name: web
    namespace: shop
  spec:
    ports:
    - name: http
      port: 80
- apiVersion: discovery.k8s.io/v1
  kind: EndpointSlice
  metadata:
    name: web-abc
    namespace: shop
    labels:
      kubernetes.io/service-name: web
  addressType: IPv4
  ports:
  - name: http
    port: 8080
  endpoints:
  - addresses: ["10.0.0.1"]
    zone: zone-a
---
apiVersion: v1
kind: ServiceList
items:
- metadata:
    name: api
  spec:
    ports:
    - port: 8080
      targetPort: web
`

const otherYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec: {}
---
apiVersion: v1
kind: Secret
metadata:
  name: cert
type: kubernetes.io/tls
stringData:
  tls.crt: CERT
  tls.key: KEY
---
apiVersion: v1
kind: Node
metadata:
  name: node-a
  labels:
    topology.kubernetes.io/zone: zone-a
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: zonal-settings
  namespace: zonal
data:
  zone-mode: balanced
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
`

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"10-ingress.yaml":   ingressYAML,
		"20-list.yml":       listYAML,
		"30-other.yaml":     otherYAML,
		"notes.txt":         "not yaml at all: [",
		".#10-ingress.yaml": "an editor's lock file",
	})
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, filepath.Join(dir, "sub"), map[string]string{"x.yaml": "kind: [broken"})

	objs, warnings, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, describe(o))
	}
	want := []string{
		"IngressClass zonal",
		"Ingress default/web",
		"Service shop/web",
		"EndpointSlice shop/web-abc",
		"Service default/api",
		"Secret default/cert",
		"Node node-a",
		"ConfigMap zonal/zonal-settings",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Load objects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	wantWarnings := []string{
		"30-other.yaml: document 1 (line 1): apps/v1 Deployment is not a kind zonal reads; ignored",
		"30-other.yaml: document 5 (line 31): example.com/v1 Widget is not a kind zonal reads; ignored",
	}
	if len(warnings) != len(wantWarnings) {
		t.Errorf("warnings %q, want %q", warnings, wantWarnings)
	}
	for i := range min(len(warnings), len(wantWarnings)) {
		if !strings.HasSuffix(warnings[i], wantWarnings[i]) {
			t.Errorf("warning %d = %q, want it to end with %q", i, warnings[i], wantWarnings[i])
		}
	}

	// What an API server would have defaulted.
	svc := objs[2].(*core_v1.Service)
	if p := svc.Spec.Ports[0]; p.Protocol != core_v1.ProtocolTCP || p.TargetPort.IntValue() != 80 || svc.Spec.Type != core_v1.ServiceTypeClusterIP {
		t.Errorf("Service defaults: type %q, port %+v", svc.Spec.Type, p)
	}
	if api := objs[4].(*core_v1.Service); api.Spec.Ports[0].TargetPort.String() != "web" {
		t.Errorf("named targetPort lost: %+v", api.Spec.Ports[0])
	}
	es := objs[3].(*discovery_v1.EndpointSlice)
	if es.Ports[0].Protocol == nil || *es.Ports[0].Protocol != core_v1.ProtocolTCP || *es.Endpoints[0].Zone != "zone-a" {
		t.Errorf("EndpointSlice: %+v", es)
	}
	sec := objs[5].(*core_v1.Secret)
	if string(sec.Data["tls.crt"]) != "CERT" || string(sec.Data["tls.key"]) != "KEY" || sec.StringData != nil {
		t.Errorf("Secret stringData not moved to data: %+v", sec)
	}
	ing := objs[1].(*networking_v1.Ingress)
	if ing.Spec.Rules[0].HTTP.Paths[0].Backend.Service.Port.Name != "http" {
		t.Errorf("Ingress decoded wrong: %+v", ing.Spec)
	}
}

func describe(o runtime.Object) string {
	m, _ := meta.Accessor(o)
	kind := fmt.Sprintf("%T", o)
	kind = kind[strings.LastIndex(kind, ".")+1:]
	if m.GetNamespace() == "" {
		return kind + " " + m.GetName()
	}
	return kind + " " + m.GetNamespace() + "/" + m.GetName()
}

func TestLoadErrors(t *testing.T) {
	for name, tc := range map[string]struct {
		yaml string
		want string // the error ends with file: want
	}{
		"bad yaml": {
			yaml: "apiVersion: v1\nkind: Service\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: [\n",
			want: "document 2 (line 5): not valid YAML: line 7: did not find expected node content",
		},
		"no kind": {
			yaml: "apiVersion: v1\nmetadata:\n  name: x\n",
			want: "document 1 (line 1): apiVersion and kind are required",
		},
		"old Ingress version": {
			yaml: "apiVersion: networking.k8s.io/v1beta1\nkind: Ingress\nmetadata:\n  name: x\n",
			want: "document 1 (line 1): networking.k8s.io/v1beta1 Ingress is not supported: use apiVersion networking.k8s.io/v1",
		},
		"no name": {
			yaml: "apiVersion: v1\nkind: Service\nmetadata:\n  namespace: shop\n",
			want: "document 1 (line 1): Service without metadata.name",
		},
		"not an object": {
			yaml: "# a list of strings\n- a\n- b\n",
			want: "document 1 (line 2): not a Kubernetes object (a mapping with apiVersion and kind)",
		},
		"wrong type": {
			yaml: "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\nspec:\n  ports: 80\n",
			want: "document 1 (line 1): v1 Service:",
		},
		"bad list item": {
			yaml: "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Service\n  metadata: {name: a}\n- kind: Service\n  metadata: {name: b}\n",
			want: "document 1 (line 1), item 2: apiVersion and kind are required",
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			writeFiles(t, dir, map[string]string{"bad.yaml": tc.yaml})
			_, _, err := Load(dir)
			if err == nil {
				t.Fatal("no error")
			}
			t.Log(err)
			prefix := filepath.Join(dir, "bad.yaml") + ": " + tc.want
			if !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("error %q\nwant prefix %q", err, prefix)
			}
		})
	}
}

func TestLoadWarnings(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  prots: []\n",
		"b.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: default\n---\n" +
			"apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: orphan\naddressType: IPv4\n",
	})
	objs, warnings, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 {
		t.Errorf("got %d objects, want the first Service and the slice", len(objs))
	}
	for _, want := range []string{
		`a.yaml: document 1 (line 1): Service: strict decoding error: unknown field "spec.prots"`,
		"b.yaml: document 1 (line 1): Service default/web is also defined at " + filepath.Join(dir, "a.yaml") + ": document 1 (line 1); ignored",
		"b.yaml: document 2 (line 7): EndpointSlice default/orphan has no label kubernetes.io/service-name",
	} {
		found := false
		for _, w := range warnings {
			found = found || strings.Contains(w, want)
		}
		if !found {
			t.Errorf("no warning %q in\n%s", want, strings.Join(warnings, "\n"))
		}
	}
}
