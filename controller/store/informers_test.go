package store

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	core_v1 "k8s.io/api/core/v1"
	meta_v1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	k8s_testing "k8s.io/client-go/testing"
)

var settings = types.NamespacedName{Namespace: "zonal", Name: "zonal-settings"}

// run starts informers over client and waits for them to sync.
func run(t *testing.T, client *fake.Clientset, opts Options) (*Store, *notes) {
	t.Helper()
	n := newNotes()
	s, inf, err := NewInformers(client, opts, n.notify)
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
	return s, n
}

func TestInformersFillSnapshot(t *testing.T) {
	client := fake.NewClientset(
		ingressClass("zonal", "1"),
		ingress("shop", "web", "2", "shop.example"),
		service("shop", "web", "3"),
		slice("shop", "web-abc", "4", "web", "10.0.0.1"),
		slice("shop", "web-def", "5", "web", "10.0.0.2"),
		slice("shop", "stray", "6", ""),
		tlsSecret("shop", "cert", "7"),
		opaqueSecret("shop", "opaque-cert", "8", map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}),
		opaqueSecret("shop", "password", "9", map[string][]byte{"password": []byte("hunter2")}),
		&core_v1.Secret{ObjectMeta: meta("shop", "token", "10"), Type: core_v1.SecretTypeServiceAccountToken},
		node("node-a", "11", "zone-a"),
		configMap(settings.Namespace, settings.Name, "12", map[string]string{"zone-mode": "balanced"}),
		configMap(settings.Namespace, "other", "13", nil),
	)
	s, _ := run(t, client, Options{ConfigMap: settings})
	snap := s.Snapshot()

	if _, ok := snap.IngressClasses["zonal"]; !ok || len(snap.IngressClasses) != 1 {
		t.Errorf("IngressClasses = %v, want zonal", keys(snap.IngressClasses))
	}
	if ing := snap.Ingresses[types.NamespacedName{Namespace: "shop", Name: "web"}]; ing == nil || ing.Spec.Rules[0].Host != "shop.example" {
		t.Errorf("Ingress shop/web = %v", ing)
	}
	if len(snap.Services) != 1 {
		t.Errorf("Services = %v", keys(snap.Services))
	}
	web := snap.EndpointSlices[types.NamespacedName{Namespace: "shop", Name: "web"}]
	if len(web) != 2 || web["web-abc"] == nil || web["web-def"] == nil {
		t.Errorf("slices of shop/web = %v, want web-abc and web-def", keys(web))
	}
	if len(snap.EndpointSlices) != 1 {
		t.Errorf("EndpointSlices grouped under %v, want only shop/web (a slice without a Service label is ignored)", keys(snap.EndpointSlices))
	}
	wantSecrets := []string{"shop/cert", "shop/opaque-cert"}
	if got := keys(snap.Secrets); strings.Join(got, " ") != strings.Join(wantSecrets, " ") {
		t.Errorf("Secrets = %v, want %v", got, wantSecrets)
	}
	if c := snap.Secrets[types.NamespacedName{Namespace: "shop", Name: "cert"}]; string(c.Data["tls.key"]) != "key" {
		t.Errorf("TLS Secret lost its key: %v", c.Data)
	}
	n := snap.Nodes["node-a"]
	if n == nil || n.Labels["topology.kubernetes.io/zone"] != "zone-a" {
		t.Fatalf("Node node-a = %v, want zone label", n)
	}
	if n.Annotations != nil || n.Status.Addresses != nil || n.Spec.PodCIDR != "" || n.ManagedFields != nil {
		t.Errorf("Node not trimmed to name and labels: %+v", n)
	}
	if snap.ConfigMap == nil || snap.ConfigMap.Name != settings.Name || snap.ConfigMap.Data["zone-mode"] != "balanced" {
		t.Errorf("ConfigMap = %v, want %s", snap.ConfigMap, settings)
	}
}

func TestInformersNotifyOnChange(t *testing.T) {
	client := fake.NewClientset(
		ingress("shop", "web", "1", "shop.example"),
		service("shop", "web", "2"),
		service("shop", "api", "3"),
		slice("shop", "web-abc", "4", "web", "10.0.0.1"),
		node("node-a", "5", "zone-a"),
	)
	s, n := run(t, client, Options{ConfigMap: settings})
	ctx := context.Background()
	before := s.Snapshot()
	n.drain()

	// Update: notified, and the new snapshot has the new object while
	// the old one is untouched.
	ing := ingress("shop", "web", "10", "new.example")
	if _, err := client.NetworkingV1().Ingresses("shop").Update(ctx, ing, meta_v1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.wait(t, KindIngress)
	after := s.Snapshot()
	key := types.NamespacedName{Namespace: "shop", Name: "web"}
	if got := after.Ingresses[key].Spec.Rules[0].Host; got != "new.example" {
		t.Errorf("after update: host %q, want new.example", got)
	}
	if got := before.Ingresses[key].Spec.Rules[0].Host; got != "shop.example" {
		t.Errorf("earlier snapshot changed: host %q", got)
	}

	// An update with the same resourceVersion (what a resync or relist
	// delivers) is not news. Events of one informer arrive in order, so
	// once the later real change is seen, the no-op has been handled.
	n.drain()
	if _, err := client.CoreV1().Services("shop").Update(ctx, service("shop", "web", "2"), meta_v1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Services("shop").Update(ctx, service("shop", "api", "11"), meta_v1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.wait(t, KindService)
	if c := n.count(); c != 1 {
		t.Errorf("notified %d times for one real Service change and one no-op", c)
	}

	// A Node status change is invisible (only labels are kept); a label
	// change is not.
	n.drain()
	nd := node("node-a", "12", "zone-a")
	nd.Status.Images = nil
	if _, err := client.CoreV1().Nodes().Update(ctx, nd, meta_v1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.CoreV1().Nodes().Update(ctx, node("node-a", "13", "zone-b"), meta_v1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.wait(t, KindNode)
	if c := n.count(); c != 1 {
		t.Errorf("notified %d times for one Node label change and one status change", c)
	}
	if got := s.Snapshot().Nodes["node-a"].Labels["topology.kubernetes.io/zone"]; got != "zone-b" {
		t.Errorf("node zone %q, want zone-b", got)
	}

	// Delete: notified, and gone.
	if err := client.DiscoveryV1().EndpointSlices("shop").Delete(ctx, "web-abc", meta_v1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.wait(t, KindEndpointSlice)
	if got := s.Snapshot().EndpointSlices; len(got) != 0 {
		t.Errorf("after delete: slices %v", keys(got))
	}

	// The ConfigMap appears and goes.
	if _, err := client.CoreV1().ConfigMaps(settings.Namespace).Create(ctx, configMap(settings.Namespace, settings.Name, "14", nil), meta_v1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n.wait(t, KindConfigMap)
	if s.Snapshot().ConfigMap == nil {
		t.Error("ConfigMap created but not in snapshot")
	}
	if err := client.CoreV1().ConfigMaps(settings.Namespace).Delete(ctx, settings.Name, meta_v1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	n.wait(t, KindConfigMap)
	if s.Snapshot().ConfigMap != nil {
		t.Error("ConfigMap deleted but still in snapshot")
	}
}

func TestInformersWatchNamespace(t *testing.T) {
	client := fake.NewClientset(
		ingressClass("zonal", "1"),
		ingress("shop", "web", "2", "shop.example"),
		ingress("other", "web", "3", "other.example"),
		service("shop", "web", "4"),
		service("other", "web", "5"),
		slice("other", "web-abc", "6", "web", "10.0.0.1"),
		tlsSecret("other", "cert", "7"),
		node("node-a", "8", "zone-a"),
		configMap(settings.Namespace, settings.Name, "9", nil),
	)
	s, _ := run(t, client, Options{WatchNamespace: "shop", ConfigMap: settings})
	snap := s.Snapshot()
	for what, got := range map[string][]string{
		"IngressClasses": keys(snap.IngressClasses),
		"Ingresses":      keys(snap.Ingresses),
		"Services":       keys(snap.Services),
		"EndpointSlices": keys(snap.EndpointSlices),
		"Secrets":        keys(snap.Secrets),
		"Nodes":          keys(snap.Nodes),
	} {
		want := map[string]string{
			"IngressClasses": "zonal", "Ingresses": "shop/web", "Services": "shop/web", "Nodes": "node-a",
		}[what]
		if strings.Join(got, " ") != want {
			t.Errorf("%s = %v, want %q", what, got, want)
		}
	}
	if snap.ConfigMap == nil {
		t.Error("ConfigMap outside the watched namespace not seen")
	}
}

func TestWaitForSyncNamesInformer(t *testing.T) {
	client := fake.NewClientset()
	client.PrependReactor("list", "secrets", func(k8s_testing.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New(`secrets is forbidden: User "zonal" cannot list resource "secrets"`)
	})
	_, inf, err := NewInformers(client, Options{WatchNamespace: "shop"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inf.Start(ctx)
	defer func() { cancel(); inf.Shutdown() }()
	syncCtx, syncCancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer syncCancel()
	err = inf.WaitForSync(syncCtx)
	if err == nil {
		t.Fatal("WaitForSync succeeded although Secrets cannot be listed")
	}
	if msg := err.Error(); !strings.Contains(msg, "Secret (namespace shop)") || strings.Contains(msg, "Ingress") {
		t.Errorf("error %q should name the Secret informer and only it", msg)
	}
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %q should wrap the context's error", err)
	}
}
