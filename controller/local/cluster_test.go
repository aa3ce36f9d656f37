package local

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	core_v1 "k8s.io/api/core/v1"
	networking_v1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/controller/store"
)

func ingressDoc(name, host string) string {
	return fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %s
  namespace: shop
spec:
  rules:
  - host: %s
`, name, host)
}

func serviceDoc(name string, port int) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Service
metadata:
  name: %s
  namespace: shop
spec:
  ports:
  - name: http
    port: %d
`, name, port)
}

func sliceDoc(name, service, addr string) string {
	return fmt.Sprintf(`apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %s
  namespace: shop
  labels:
    kubernetes.io/service-name: %s
addressType: IPv4
endpoints:
- addresses: [%q]
`, name, service, addr)
}

// eventually retries check until it returns "" or timeout passes.
func eventually(t *testing.T, timeout time.Duration, check func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		msg := check()
		if msg == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", timeout, msg)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// reports collects what Watch reports.
type reports struct {
	mu   sync.Mutex
	errs []error
}

func (r *reports) add(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}

func (r *reports) find(s string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range r.errs {
		if strings.Contains(e.Error(), s) {
			return true
		}
	}
	return false
}

func startWatch(t *testing.T, c *Cluster) *reports {
	r := &reports{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { c.Watch(ctx, 20*time.Millisecond, r.add); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return r
}

func TestNewClusterStampsObjects(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.yaml": ingressDoc("first", "a.example") + "---\n" + ingressDoc("second", "b.example"),
		"b.yaml": ingressDoc("third", "c.example") + "---\n" +
			strings.Replace(ingressDoc("dated", "d.example"), "  namespace: shop\n",
				"  namespace: shop\n  creationTimestamp: \"2019-05-01T10:00:00Z\"\n", 1),
	})
	c, warnings, err := NewCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 0 {
		t.Errorf("warnings: %q", warnings)
	}
	uids := map[types.UID]bool{}
	for i, tc := range []struct {
		name    string
		created time.Time
	}{
		{"first", StartTime},
		{"second", StartTime.Add(time.Second)},
		{"third", StartTime.Add(2 * time.Second)},
		{"dated", time.Date(2019, 5, 1, 10, 0, 0, 0, time.UTC)},
	} {
		ing, err := c.Client().NetworkingV1().Ingresses("shop").Get(context.Background(), tc.name, meta_v1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if !ing.CreationTimestamp.Time.Equal(tc.created) {
			t.Errorf("%d %s: creationTimestamp %v, want %v", i, tc.name, ing.CreationTimestamp, tc.created)
		}
		if ing.UID == "" || uids[ing.UID] || ing.ResourceVersion == "" {
			t.Errorf("%s: uid %q (seen: %v), resourceVersion %q", tc.name, ing.UID, uids[ing.UID], ing.ResourceVersion)
		}
		uids[ing.UID] = true
	}
}

func TestNewClusterFailsOnBrokenFile(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": serviceDoc("web", 80) + "---\nkind: [\n"})
	_, _, err := NewCluster(dir)
	if err == nil || !strings.Contains(err.Error(), "a.yaml: document 2 (line 11): not valid YAML") {
		t.Errorf("error %v, want one naming a.yaml, document 2", err)
	}
}

func TestWatchFollowsFiles(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": serviceDoc("web", 80)})
	c, _, err := NewCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	r := startWatch(t, c)
	services := c.Client().CoreV1().Services("shop")
	ctx := context.Background()
	get := func(name string) (*core_v1.Service, error) {
		return services.Get(ctx, name, meta_v1.GetOptions{})
	}

	// A new file: its objects appear, younger than those loaded at start.
	writeFiles(t, dir, map[string]string{"b.yaml": serviceDoc("api", 8080)})
	eventually(t, 2*time.Second, func() string {
		if _, err := get("api"); err != nil {
			return "new file's Service: " + err.Error()
		}
		return ""
	})
	api, _ := get("api")
	web, _ := get("web")
	if !api.CreationTimestamp.After(web.CreationTimestamp.Time) {
		t.Errorf("new Service created %v, not after the one loaded at start (%v)", api.CreationTimestamp, web.CreationTimestamp)
	}

	// An edit updates in place: same uid and age, new version.
	writeFiles(t, dir, map[string]string{"b.yaml": serviceDoc("api", 9090)})
	eventually(t, 2*time.Second, func() string {
		s, err := get("api")
		if err != nil || s.Spec.Ports[0].Port != 9090 {
			return fmt.Sprintf("edited Service: %v %v", s, err)
		}
		return ""
	})
	edited, _ := get("api")
	if edited.UID != api.UID || !edited.CreationTimestamp.Equal(&api.CreationTimestamp) || edited.ResourceVersion == api.ResourceVersion {
		t.Errorf("update changed uid %q→%q or age %v→%v, or kept version %q",
			api.UID, edited.UID, api.CreationTimestamp, edited.CreationTimestamp, edited.ResourceVersion)
	}

	// Saving the same content again changes nothing.
	writeFiles(t, dir, map[string]string{"b.yaml": serviceDoc("api", 9090) + "# saved again\n"})
	time.Sleep(200 * time.Millisecond)
	if again, _ := get("api"); again.ResourceVersion != edited.ResourceVersion {
		t.Errorf("unchanged object rewritten: version %q→%q", edited.ResourceVersion, again.ResourceVersion)
	}

	// A broken edit is reported and keeps the objects.
	writeFiles(t, dir, map[string]string{"b.yaml": serviceDoc("api", 7070) + "---\nkind: [\n"})
	eventually(t, 2*time.Second, func() string {
		if !r.find("b.yaml: document 2 (line 11): not valid YAML") {
			return "broken file not reported"
		}
		return ""
	})
	if s, err := get("api"); err != nil || s.Spec.Ports[0].Port != 9090 {
		t.Errorf("broken file changed its objects: %v %v", s, err)
	}

	// Removing the file deletes its objects, and only those.
	if err := os.Remove(filepath.Join(dir, "b.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, func() string {
		if _, err := get("api"); !apierrors.IsNotFound(err) {
			return fmt.Sprintf("Service of removed file: %v", err)
		}
		return ""
	})
	if _, err := get("web"); err != nil {
		t.Errorf("other file's Service: %v", err)
	}

	// Unknown kinds are reported as warnings.
	writeFiles(t, dir, map[string]string{"c.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n"})
	eventually(t, 2*time.Second, func() string {
		if !r.find("apps/v1 Deployment is not a kind zonal reads") {
			return "unknown kind not reported"
		}
		return ""
	})
}

func TestClientWritesAreVersioned(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": ingressDoc("web", "a.example")})
	c, _, err := NewCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	ingresses := c.Client().NetworkingV1().Ingresses("shop")
	ing, err := ingresses.Get(ctx, "web", meta_v1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ing.Status.LoadBalancer.Ingress = []networking_v1.IngressLoadBalancerIngress{{IP: "192.0.2.1"}}
	updated, err := ingresses.UpdateStatus(ctx, ing, meta_v1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.ResourceVersion == ing.ResourceVersion || updated.UID != ing.UID {
		t.Errorf("status update: version %q→%q, uid %q→%q", ing.ResourceVersion, updated.ResourceVersion, ing.UID, updated.UID)
	}
	patched, err := ingresses.Patch(ctx, "web", types.MergePatchType, []byte(`{"metadata":{"labels":{"a":"b"}}}`), meta_v1.PatchOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if patched.ResourceVersion == updated.ResourceVersion || patched.Labels["a"] != "b" {
		t.Errorf("patch kept version %q or lost the label: %v", patched.ResourceVersion, patched.Labels)
	}
	created, err := c.Client().CoreV1().ConfigMaps("zonal").Create(ctx, &core_v1.ConfigMap{ObjectMeta: meta_v1.ObjectMeta{Name: "x"}}, meta_v1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.UID == "" || created.ResourceVersion == "" || created.CreationTimestamp.IsZero() {
		t.Errorf("created object not stamped: %+v", created.ObjectMeta)
	}
}

// TestStoreOverCluster runs the controller's informers over a local
// cluster and sees file edits in the Store's snapshots.
func TestStoreOverCluster(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"app.yaml": ingressDoc("web", "shop.example") + "---\n" + serviceDoc("web", 80) + "---\n" +
			sliceDoc("web-1", "web", "10.0.0.1"),
		"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: zonal\n  namespace: zonal\ndata:\n  zone-mode: local\n",
	})
	c, _, err := NewCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	kinds := map[string]int{}
	s, inf, err := store.NewInformers(c.Client(), store.Options{
		WatchNamespace: "shop",
		ConfigMap:      types.NamespacedName{Namespace: "zonal", Name: "zonal"},
	}, func(kind string) {
		mu.Lock()
		kinds[kind]++
		mu.Unlock()
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inf.Start(ctx)
	t.Cleanup(func() { cancel(); inf.Shutdown() })
	syncCtx, syncCancel := context.WithTimeout(ctx, 5*time.Second)
	defer syncCancel()
	if err := inf.WaitForSync(syncCtx); err != nil {
		t.Fatal(err)
	}
	startWatch(t, c)

	web := types.NamespacedName{Namespace: "shop", Name: "web"}
	snap := s.Snapshot()
	if snap.Ingresses[web] == nil || snap.Services[web] == nil || len(snap.EndpointSlices[web]) != 1 ||
		snap.ConfigMap == nil || snap.ConfigMap.Data["zone-mode"] != "local" {
		t.Fatalf("initial snapshot: ingresses %v services %v slices %v configmap %v",
			snap.Ingresses, snap.Services, snap.EndpointSlices, snap.ConfigMap)
	}

	// Edit the Ingress, add a slice of 300 endpoints' worth of slices in
	// one go (more events than a fake watcher holds), and change the
	// settings.
	var more strings.Builder
	for i := range 300 {
		fmt.Fprintf(&more, "---\n%s", sliceDoc(fmt.Sprintf("web-more-%d", i), "web", fmt.Sprintf("10.1.%d.%d", i/250, i%250)))
	}
	writeFiles(t, dir, map[string]string{
		"app.yaml":      ingressDoc("web", "new.example") + "---\n" + serviceDoc("web", 80) + "---\n" + sliceDoc("web-1", "web", "10.0.0.1"),
		"more.yaml":     more.String(),
		"settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: zonal\n  namespace: zonal\ndata:\n  zone-mode: balanced\n",
	})
	eventually(t, 2*time.Second, func() string {
		snap := s.Snapshot()
		if h := snap.Ingresses[web].Spec.Rules[0].Host; h != "new.example" {
			return "Ingress host " + h
		}
		if n := len(snap.EndpointSlices[web]); n != 301 {
			return fmt.Sprintf("%d slices of shop/web, want 301", n)
		}
		if snap.ConfigMap.Data["zone-mode"] != "balanced" {
			return "settings not updated"
		}
		return ""
	})

	// Delete a file: its objects leave the snapshot.
	if err := os.Remove(filepath.Join(dir, "more.yaml")); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Second, func() string {
		if n := len(s.Snapshot().EndpointSlices[web]); n != 1 {
			return fmt.Sprintf("%d slices of shop/web, want 1", n)
		}
		return ""
	})
	mu.Lock()
	defer mu.Unlock()
	for _, k := range []string{store.KindIngress, store.KindEndpointSlice, store.KindConfigMap} {
		if kinds[k] == 0 {
			t.Errorf("no %s notification", k)
		}
	}
}

func TestWatchSaveByDeleteAndCreate(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{"a.yaml": serviceDoc("web", 80)})
	c, _, err := NewCluster(dir)
	if err != nil {
		t.Fatal(err)
	}
	services := c.Client().CoreV1().Services("shop")
	before, err := services.Get(context.Background(), "web", meta_v1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	startWatch(t, c)
	time.Sleep(50 * time.Millisecond)
	if err := os.Remove(filepath.Join(dir, "a.yaml")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(30 * time.Millisecond) // a pass or so sees no file
	writeFiles(t, dir, map[string]string{"a.yaml": serviceDoc("web", 81)})
	eventually(t, 2*time.Second, func() string {
		s, err := services.Get(context.Background(), "web", meta_v1.GetOptions{})
		if err != nil || s.Spec.Ports[0].Port != 81 {
			return fmt.Sprintf("Service after save: %v %v", s, err)
		}
		if s.UID != before.UID || !s.CreationTimestamp.Equal(&before.CreationTimestamp) {
			return fmt.Sprintf("Service recreated: uid %q→%q, created %v→%v", before.UID, s.UID, before.CreationTimestamp, s.CreationTimestamp)
		}
		return ""
	})
}
