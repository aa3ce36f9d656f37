package controller

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/test/harness"
)

// webIngress routes host web.test to Service web, and each of paths
// (Prefix) to the Service of the same name.
func webIngress(paths ...string) string { return hostIngress("web", "web.test", "web", paths...) }

// hostIngress is Ingress name in namespace shop that routes host to
// Service root, and each of paths (Prefix) to the Service of the same
// name.
func hostIngress(name, host, root string, paths ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: networking.k8s.io/v1
kind: Ingress
metadata:
  name: %s
  namespace: shop
spec:
  ingressClassName: zonal
  rules:
  - host: "%s"
    http:
      paths:
      - path: /
        pathType: Prefix
        backend:
          service:
            name: %s
            port:
              number: 80
`, name, host, root)
	for _, p := range paths {
		fmt.Fprintf(&b, `      - path: /%s
        pathType: Prefix
        backend:
          service:
            name: %s
            port:
              number: 80
`, p, p)
	}
	return b.String()
}

// TestEndpointChangeWithoutReload edits an EndpointSlice file: requests
// follow the new endpoints within a bounded time, none fails meanwhile,
// and NGINX is not reloaded (same master, same workers, same nginx.conf,
// no reload in the log).
func TestEndpointChangeWithoutReload(t *testing.T) {
	t.Parallel()
	bs := backends(t, 121, "old", "new", "third")
	// Three backends of one Service; the slice names one or more of them.
	// They share a port only by chance, so each gets a slice of its own
	// when several are listed.
	webSlices := func(names ...string) string {
		var ds []string
		for i, n := range names {
			ds = append(ds, slice("shop", fmt.Sprintf("web-%d", i), "web", bs[n]))
		}
		return docs(ds...)
	}
	svc := service("shop", "web") // no endpoints: the slices are in a file of their own
	c := start(t, nil, manifests{
		"class.yaml":     ingressClass,
		"ingress.yaml":   webIngress(),
		"service.yaml":   svc,
		"endpoints.yaml": webSlices("old"),
	})
	hc := c.Client(harness.ClientOptions{})
	waitBackend(t, hc, "http://web.test/", "old", changeTimeout)
	before := snapshot(t, c)

	for _, step := range []struct {
		name string
		to   []string
		wait string // the backend that answers only after the change
	}{
		{"move to another endpoint", []string{"new"}, "new"},
		{"scale out to two", []string{"new", "third"}, "third"},
		{"back to the first", []string{"old"}, "old"},
	} {
		wanted := func(b string) bool { return slices.Contains(step.to, b) }
		// The load accepts the endpoints before and after the edit: no
		// request may fail during the switch.
		l := startLoad(c, "http://web.test/load", 2, true, func(string) bool { return true })
		written := time.Now()
		c.WriteManifest("endpoints.yaml", webSlices(step.to...))
		took := waitBackend(t, hc, "http://web.test/", step.wait, changeTimeout)
		t.Logf("%s: first request on the new endpoint %v after the file was written", step.name, took.Round(time.Millisecond))
		// Every worker has switched: new connections spread over them.
		seen := map[string]int{}
		for range 40 {
			r := get(t, hc, "http://web.test/after")
			seen[r.Backend()]++
			if !wanted(r.Backend()) {
				t.Errorf("%s: %v after the switch, a request answered %s", step.name, time.Since(written).Round(time.Millisecond), describe(r))
				break
			}
		}
		if len(step.to) > 1 && len(seen) != len(step.to) {
			t.Errorf("%s: answers by backend %v, want all of %v", step.name, seen, step.to)
		}
		l.finish(t, step.name)
	}

	// A Service without endpoints answers 503, still without a reload,
	// and comes back when they do.
	c.WriteManifest("endpoints.yaml", emptySlice)
	err := harness.WaitUntil(changeTimeout, 10*time.Millisecond, func() error {
		r, err := harness.Get(hc, "http://web.test/")
		if err != nil {
			return err
		}
		if r.Status != http.StatusServiceUnavailable || r.Backend() != "" {
			return errors.New(describe(r))
		}
		return nil
	})
	if err != nil {
		t.Errorf("with no endpoints: last answer %v, want 503 from NGINX", err)
	}
	c.WriteManifest("endpoints.yaml", webSlices("new"))
	waitBackend(t, hc, "http://web.test/", "new", changeTimeout)

	expectNoReload(t, c, before)
}

// emptySlice is Service web's EndpointSlice when no Pod is ready.
const emptySlice = `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-0
  namespace: shop
  labels:
    kubernetes.io/service-name: web
addressType: IPv4
ports:
- name: http
  port: 8080
endpoints: []
`

// TestIngressChangeReloads adds a path to an Ingress: NGINX reloads (new
// workers, same master) and serves it, and no request fails meanwhile.
func TestIngressChangeReloads(t *testing.T) {
	t.Parallel()
	bs := backends(t, 131, "web", "one", "two")
	c := start(t, nil, manifests{
		"class.yaml":    ingressClass,
		"ingress.yaml":  webIngress("one"),
		"services.yaml": docs(service("shop", "web", bs["web"]), service("shop", "one", bs["one"]), service("shop", "two", bs["two"])),
	})
	hc := c.Client(harness.ClientOptions{})
	expectRoute(t, hc, "http://web.test/one/x", "one")
	expectRoute(t, hc, "http://web.test/two/x", "web")
	before := snapshot(t, c)

	// New connections for every request, so old workers finish at once.
	l := startLoad(c, "http://web.test/one/load", 2, false, func(b string) bool { return b == "one" })
	c.WriteManifest("ingress.yaml", webIngress("one", "two"))
	took := waitBackend(t, hc, "http://web.test/two/x", "two", changeTimeout)
	t.Logf("new path served %v after the file was written", took.Round(time.Millisecond))

	workers := waitReloaded(t, c, before.workers)
	l.finish(t, "during the reload")
	if m := c.MasterPID(); m != before.master {
		t.Errorf("NGINX master changed from %d to %d; a reload keeps it", before.master, m)
	}
	if line := c.WaitLog(before.logOff, time.Second, "reconfiguring"); line == "" {
		t.Errorf("no \"reconfiguring\" in the log since the change:\n%s", c.LogSince(before.logOff))
	}
	expectRoute(t, hc, "http://web.test/one/x", "one")
	expectRoute(t, hc, "http://web.test/", "web")
	t.Logf("workers %v → %v, master %d", before.workers, workers, before.master)
}

// TestQuickSuccessiveEdits saves the EndpointSlice file twice in a row
// with the same size, faster than the file system's timestamps tick, and
// then deletes it: the last content wins, and a deleted file's objects are
// deleted.
func TestQuickSuccessiveEdits(t *testing.T) {
	t.Parallel()
	bs := backends(t, 191, "first", "second", "third")
	sliceFor := func(name string) string {
		s := slice("shop", "web-0", "web", bs[name])
		// The same size whatever the port: pad to a fixed length.
		return s + "# " + strings.Repeat("x", 600-len(s)) + "\n"
	}
	svc := service("shop", "web") // no endpoints: the slices are in a file of their own
	c := start(t, nil, manifests{
		"class.yaml":     ingressClass,
		"ingress.yaml":   webIngress(),
		"service.yaml":   svc,
		"endpoints.yaml": sliceFor("first"),
	})
	hc := c.Client(harness.ClientOptions{})
	waitBackend(t, hc, "http://web.test/", "first", changeTimeout)

	c.WriteManifest("endpoints.yaml", sliceFor("second"))
	c.WriteManifest("endpoints.yaml", sliceFor("third"))
	waitBackend(t, hc, "http://web.test/", "third", changeTimeout)
	// It stays there: nothing applies "second" late.
	time.Sleep(time.Second)
	for range 20 {
		expectRoute(t, hc, "http://web.test/", "third")
	}

	c.RemoveManifest("endpoints.yaml")
	err := harness.WaitUntil(changeTimeout, 10*time.Millisecond, func() error {
		r, err := harness.Get(hc, "http://web.test/")
		if err != nil {
			return err
		}
		if r.Status != http.StatusServiceUnavailable {
			return errors.New(describe(r))
		}
		return nil
	})
	if err != nil {
		t.Errorf("after deleting the EndpointSlice's file: %v, want 503 from NGINX", err)
	}
}

// TestZoneLocal: a Service with zonal.dev/zone-mode: local gets its
// requests in the controller's zone (--zone zone-a) while an endpoint
// there is ready, and fails open to the other zones when none is; a
// Service without topology settings (auto: off) spreads over all zones.
func TestZoneLocal(t *testing.T) {
	t.Parallel()
	local := harness.StartEchoBackend(t, "local", "127.0.0.221", "zone-a")
	remote := harness.StartEchoBackend(t, "remote", "127.0.0.222", "zone-b")
	services := func(localReady bool) string {
		s := `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
  annotations:
    zonal.dev/zone-mode: local
spec:
  ports:
  - {name: http, port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Service
metadata:
  name: spread
  namespace: shop
spec:
  ports:
  - {name: http, port: 80, targetPort: 8080}
`
		for _, svc := range []string{"web", "spread"} {
			for _, be := range []*harness.EchoBackend{local, remote} {
				ready := be != local || localReady
				s += fmt.Sprintf(`---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s-%[2]s
  namespace: shop
  labels:
    kubernetes.io/service-name: %[1]s
addressType: IPv4
ports:
- {name: http, port: %[3]d}
endpoints:
- addresses: ["%[4]s"]
  zone: %[5]s
  conditions: {ready: %[6]t}
`, svc, be.Name, be.Port(), be.IP(), be.Zone, ready)
			}
		}
		return s
	}
	c := start(t, nil, manifests{
		"class.yaml":    ingressClass,
		"ingress.yaml":  webIngress("spread"),
		"services.yaml": services(true),
	})
	hc := c.Client(harness.ClientOptions{})
	count := func(url string) map[string]int {
		seen := map[string]int{}
		for range 40 {
			seen[get(t, hc, url).Backend()]++
		}
		return seen
	}
	if seen := count("http://web.test/"); seen["local"] != 40 {
		t.Errorf("zone-mode local: answers by backend %v, want all 40 from the zone-a one", seen)
	}
	if seen := count("http://web.test/spread"); seen["local"] == 0 || seen["remote"] == 0 {
		t.Errorf("no topology (auto is off): answers by backend %v, want both zones", seen)
	}

	c.WriteManifest("services.yaml", services(false))
	waitBackend(t, hc, "http://web.test/", "remote", changeTimeout)
	if seen := count("http://web.test/"); seen["remote"] != 40 {
		t.Errorf("zone-a endpoint not ready: answers by backend %v, want all from zone-b", seen)
	}
}
