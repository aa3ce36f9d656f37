package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/controller"
	"github.com/zonal-ingress/zonal/controller/zone"
)

// controllerCmd is `zonal controller`, the daemon.
type controllerCmd struct {
	Kubeconfig string `help:"Kubeconfig file for cluster access; empty uses the in-cluster service account." env:"ZONAL_KUBECONFIG" type:"path" group:"Cluster"`
	Manifests  string `help:"Local mode: serve the Kubernetes objects in the *.yaml and *.yml files of DIR instead of a cluster, following edits to them." env:"ZONAL_MANIFESTS" type:"path" placeholder:"DIR" group:"Cluster"`

	WatchNamespace           string `help:"Watch Ingresses, Services, EndpointSlices and Secrets in this namespace only; empty watches all." env:"ZONAL_WATCH_NAMESPACE" group:"Scope"`
	IngressClass             string `help:"IngressClass name this controller serves." env:"ZONAL_INGRESS_CLASS" default:"zonal" group:"Scope"`
	ControllerClass          string `help:"spec.controller of the IngressClasses this controller serves." env:"ZONAL_CONTROLLER_CLASS" default:"zonal.dev/ingress-controller" group:"Scope"`
	WatchIngressWithoutClass bool   `help:"Also serve Ingresses that name no class." env:"ZONAL_WATCH_INGRESS_WITHOUT_CLASS" group:"Scope"`
	ConfigMap                string `name:"configmap" help:"ConfigMap with global settings, as NAMESPACE/NAME; empty for none." env:"ZONAL_CONFIGMAP" placeholder:"NAMESPACE/NAME" group:"Scope"`

	NGINXBinary           string        `name:"nginx-binary" help:"NGINX binary with the zonal module; empty looks for nginx beside the zonal binary, then on PATH." env:"ZONAL_NGINX_BINARY" type:"path" group:"NGINX"`
	RuntimeDir            string        `help:"Directory for nginx.conf, the endpoint table, certificates, temp files and the pid file." env:"ZONAL_RUNTIME_DIR" default:"/run/zonal" type:"path" group:"NGINX"`
	BindAddress           string        `help:"Address NGINX listens on; empty listens on all addresses." env:"ZONAL_BIND_ADDRESS" group:"NGINX"`
	HTTPPort              int           `name:"http-port" help:"Port for plain HTTP." env:"ZONAL_HTTP_PORT" default:"80" group:"NGINX"`
	HTTPSPort             int           `name:"https-port" help:"Port for HTTPS." env:"ZONAL_HTTPS_PORT" default:"443" group:"NGINX"`
	WorkerProcesses       int           `help:"NGINX worker processes; 0 means one per CPU." env:"ZONAL_WORKER_PROCESSES" default:"0" group:"NGINX"`
	DefaultBackendService string        `help:"Service, as NAMESPACE/NAME, that serves requests no Ingress rule matches (its first port); empty answers 404." env:"ZONAL_DEFAULT_BACKEND_SERVICE" placeholder:"NAMESPACE/NAME" group:"NGINX"`
	SSLRedirect           bool          `name:"ssl-redirect" help:"Redirect plain HTTP to HTTPS on every host with TLS; an Ingress can say otherwise with the zonal.dev/ssl-redirect annotation." env:"ZONAL_SSL_REDIRECT" group:"NGINX"`
	ReloadMinInterval     time.Duration `help:"Least time between two NGINX reloads; endpoint changes never reload." env:"ZONAL_RELOAD_MIN_INTERVAL" default:"1s" group:"NGINX"`

	Zone     string `help:"This ingress pod's availability zone; empty reads it from the Node named by NODE_NAME." env:"ZONAL_ZONE" group:"Zones"`
	ZoneMode string `help:"How peers are preferred: off, local, hints, balanced or auto (hints where a Service asks for topology, else off). A Service's zonal.dev/zone-mode annotation overrides it." env:"ZONAL_ZONE_MODE" default:"auto" enum:"off,local,hints,balanced,auto" group:"Zones"`

	ZoneMinEndpoints int            `help:"Least ready endpoints a backend needs before balanced mode keeps traffic local." env:"ZONAL_ZONE_MIN_ENDPOINTS" default:"3" group:"Zones"`
	ZoneReplicas     map[string]int `help:"This controller's replicas per zone for balanced mode, as ZONE=COUNT;...; empty counts the ready endpoints of --publish-service." env:"ZONAL_ZONE_REPLICAS" placeholder:"ZONE=COUNT;..." group:"Zones"`
	PublishService   string         `help:"The controller's own Service, as NAMESPACE/NAME: its endpoints count the replicas per zone." env:"ZONAL_PUBLISH_SERVICE" placeholder:"NAMESPACE/NAME" group:"Zones"`

	DebugAddress   string `help:"Address of the debug endpoint (zonal dbg talks to it); keep it on loopback. Empty turns it off." env:"ZONAL_DEBUG_ADDRESS" default:"127.0.0.1:10246" group:"Operations"`
	MetricsAddress string `help:"Address of the Prometheus /metrics endpoint. Empty turns it off." env:"ZONAL_METRICS_ADDRESS" default:":10254" group:"Operations"`

	LogLevel string `help:"Log level: debug, info, warn or error." env:"ZONAL_LOG_LEVEL" default:"info" enum:"debug,info,warn,error"`
}

func (c *controllerCmd) Run() error {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.LogLevel)); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))

	cfg, err := c.config()
	if err != nil {
		return err
	}
	cfg.Log = log

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	return controller.Run(ctx, cfg)
}

func (c *controllerCmd) config() (controller.Config, error) {
	if c.Kubeconfig != "" && c.Manifests != "" {
		return controller.Config{}, fmt.Errorf("--kubeconfig and --manifests exclude each other: pick a cluster or local mode")
	}
	defaultBackend, err := namespacedName("--default-backend-service", c.DefaultBackendService)
	if err != nil {
		return controller.Config{}, err
	}
	configMap, err := namespacedName("--configmap", c.ConfigMap)
	if err != nil {
		return controller.Config{}, err
	}
	publishService, err := namespacedName("--publish-service", c.PublishService)
	if err != nil {
		return controller.Config{}, err
	}
	for z, n := range c.ZoneReplicas {
		if n < 0 {
			return controller.Config{}, fmt.Errorf("--zone-replicas %s=%d: a count is 0 or more", z, n)
		}
	}
	if c.ZoneMinEndpoints < 0 {
		return controller.Config{}, fmt.Errorf("--zone-min-endpoints %d: 0 or more", c.ZoneMinEndpoints)
	}
	mode, err := zone.ParseMode(c.ZoneMode)
	if err != nil {
		return controller.Config{}, err
	}
	for _, p := range []struct {
		flag string
		port int
	}{{"--http-port", c.HTTPPort}, {"--https-port", c.HTTPSPort}} {
		if p.port < 1 || p.port > 65535 {
			return controller.Config{}, fmt.Errorf("%s %d: a port is 1 to 65535", p.flag, p.port)
		}
	}
	if c.HTTPPort == c.HTTPSPort {
		return controller.Config{}, fmt.Errorf("--http-port and --https-port are both %d", c.HTTPPort)
	}
	return controller.Config{
		Kubeconfig:               c.Kubeconfig,
		Manifests:                c.Manifests,
		WatchNamespace:           c.WatchNamespace,
		IngressClass:             c.IngressClass,
		ControllerClass:          c.ControllerClass,
		WatchIngressWithoutClass: c.WatchIngressWithoutClass,
		ConfigMap:                configMap,
		NGINXBinary:              c.NGINXBinary,
		RuntimeDir:               c.RuntimeDir,
		BindAddress:              c.BindAddress,
		HTTPPort:                 c.HTTPPort,
		HTTPSPort:                c.HTTPSPort,
		WorkerProcesses:          c.WorkerProcesses,
		DefaultBackendService:    defaultBackend,
		SSLRedirect:              c.SSLRedirect,
		ReloadMinInterval:        c.ReloadMinInterval,
		Zone:                     c.Zone,
		ZoneMode:                 mode,
		ZoneMinEndpoints:         c.ZoneMinEndpoints,
		ZoneReplicas:             c.ZoneReplicas,
		PublishService:           publishService,
		NodeName:                 os.Getenv("NODE_NAME"),
		DebugAddress:             c.DebugAddress,
		MetricsAddress:           c.MetricsAddress,
	}, nil
}

// namespacedName parses NAMESPACE/NAME; empty is the zero value.
func namespacedName(flag, s string) (types.NamespacedName, error) {
	if s == "" {
		return types.NamespacedName{}, nil
	}
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%s %q: want NAMESPACE/NAME", flag, s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}
