// Package controller wires the zonal controller together: cluster access
// (a real cluster or a local manifests directory), the informer-fed store,
// the sync loop, the endpoint table and the NGINX process.
package controller

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	core_v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typed_core_v1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/controller/debug"
	"github.com/zonal-ingress/zonal/controller/live"
	"github.com/zonal-ingress/zonal/controller/local"
	"github.com/zonal-ingress/zonal/controller/loop"
	"github.com/zonal-ingress/zonal/controller/metrics"
	"github.com/zonal-ingress/zonal/controller/model"
	"github.com/zonal-ingress/zonal/controller/nginx"
	"github.com/zonal-ingress/zonal/controller/store"
	"github.com/zonal-ingress/zonal/controller/zone"
)

// Config is everything `zonal controller` is told.
type Config struct {
	Kubeconfig string
	// Manifests selects local mode: the objects in this directory's YAML
	// files, kept in step with edits.
	Manifests string
	// Client, when set, is used instead of Kubeconfig or Manifests (tests
	// and benchmarks drive a fake clientset this way).
	Client kubernetes.Interface

	WatchNamespace           string
	IngressClass             string
	ControllerClass          string
	WatchIngressWithoutClass bool
	ConfigMap                types.NamespacedName

	NGINXBinary           string
	RuntimeDir            string
	BindAddress           string
	HTTPPort              int
	HTTPSPort             int
	WorkerProcesses       int
	DefaultBackendService types.NamespacedName
	SSLRedirect           bool
	ReloadMinInterval     time.Duration

	Zone             string
	ZoneMode         zone.Mode
	ZoneMinEndpoints int
	// ZoneReplicas counts this controller's replicas per zone, for
	// balanced mode.
	ZoneReplicas map[string]int
	// PublishService is the controller's own Service (--publish-service).
	PublishService types.NamespacedName
	// NodeName is the Node this pod runs on (the downward API's NODE_NAME).
	NodeName string

	// DebugAddress and MetricsAddress are where the debug endpoint and
	// /metrics listen; empty turns them off.
	DebugAddress   string
	MetricsAddress string

	Log *slog.Logger
	// NGINXStdout receives the access log; nil means the controller's
	// standard output.
	NGINXStdout io.Writer
	// OnPass, if set, sees the result of every sync pass.
	OnPass func(loop.Result)
	// Ready, if set, is called once NGINX serves the first configuration.
	Ready func(*Running)
}

// Running is a started controller, for tests and the debug endpoint.
type Running struct {
	NGINX  *nginx.Process
	Tables *table.Publisher
	Loop   *loop.Loop
	State  *live.State
}

// Run runs the controller until ctx ends, then stops NGINX gracefully.
func Run(ctx context.Context, cfg Config) error {
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	runtimeDir, err := filepath.Abs(cfg.RuntimeDir)
	if err != nil {
		return err
	}
	binary, err := nginx.FindBinary(cfg.NGINXBinary)
	if err != nil {
		return err
	}

	client, err := clientFor(ctx, cfg, log)
	if err != nil {
		return err
	}

	settings := nginx.Settings{
		RuntimeDir:      runtimeDir,
		BindAddress:     cfg.BindAddress,
		IPv6:            cfg.BindAddress == "" && ipv6Available(),
		HTTPPort:        cfg.HTTPPort,
		HTTPSPort:       cfg.HTTPSPort,
		WorkerProcesses: cfg.WorkerProcesses,
	}
	if os.Geteuid() == 0 {
		// The runtime directory holds the table that workers read; as root
		// the workers would otherwise run as nobody.
		settings.User = "root"
	}
	if err := os.MkdirAll(runtimeDir, 0o755); err != nil {
		return fmt.Errorf("runtime directory: %w", err)
	}
	tables, err := table.OpenPublisher(settings.TableDir())
	if err != nil {
		return err
	}
	defer tables.Close()

	events := newEventSink(client, log)
	defer events.Shutdown()

	l := &loop.Loop{
		Model: model.Options{
			IngressClass:             cfg.IngressClass,
			ControllerClass:          cfg.ControllerClass,
			WatchIngressWithoutClass: cfg.WatchIngressWithoutClass,
			DefaultBackendService:    cfg.DefaultBackendService,
			SSLRedirect:              cfg.SSLRedirect,
			Certificates:             &model.CertCache{},
		},
		Zone: zone.Policy{
			Zone:         cfg.Zone,
			Mode:         cfg.ZoneMode,
			MinEndpoints: cfg.ZoneMinEndpoints,
			Replicas:     cfg.ZoneReplicas,
		},
		NodeName:          cfg.NodeName,
		PublishService:    cfg.PublishService,
		Tables:            tables,
		Problem:           events.problem,
		Log:               log,
		HoldOff:           2 * time.Millisecond,
		MaxHoldOff:        100 * time.Millisecond,
		ReloadMinInterval: cfg.ReloadMinInterval,
	}
	st, informers, err := store.NewInformers(client, store.Options{
		WatchNamespace: cfg.WatchNamespace,
		ConfigMap:      cfg.ConfigMap,
	}, l.NotifyKind)
	if err != nil {
		return err
	}
	l.Store = st

	informerCtx, stopInformers := context.WithCancel(ctx)
	defer func() {
		stopInformers()
		informers.Shutdown()
	}()
	informers.Start(informerCtx)
	if err := informers.WaitForSync(ctx); err != nil {
		return err
	}
	log.Info("informers synced")
	state := &live.State{}
	state.Synced()
	stats := metrics.New(state, nginxStatus(settings))
	stats.Log = log
	onPass := func(r loop.Result) {
		state.Pass(r)
		stats.Observe(r)
		if cfg.OnPass != nil {
			cfg.OnPass(r)
		}
	}
	serve(ctx, log, "debug endpoint", cfg.DebugAddress, (&debug.Server{State: state, Log: log}).ListenAndServe)
	serve(ctx, log, "metrics", cfg.MetricsAddress, stats.ListenAndServe)

	stdout := cfg.NGINXStdout
	if stdout == nil {
		stdout = os.Stdout
	}
	proc := &nginx.Process{
		Binary:     binary,
		RuntimeDir: runtimeDir,
		Stdout:     stdout,
		Stderr:     logWriter{log: log.With("source", "nginx")},
		OnExit: func(err error) {
			log.Error("NGINX master exited; restarting it", "error", err)
		},
	}
	conf := &nginxConfig{settings: settings, proc: proc}
	l.Render, l.NGINX = conf.render, conf

	first := l.Init()
	onPass(first)
	if first.ReloadErr != nil || first.RenderErr != nil {
		return fmt.Errorf("the first configuration failed, NGINX not started: %w",
			errors.Join(first.RenderErr, first.ReloadErr))
	}
	if err := proc.Start(ctx); err != nil {
		return err
	}
	log.Info("NGINX started", "pid", proc.MasterPID(), "generation", tables.Generation())
	state.Started(proc, settings.TableDir(), settings.ConfFile())
	if cfg.Ready != nil {
		cfg.Ready(&Running{NGINX: proc, Tables: tables, Loop: l, State: state})
	}

	l.Run(ctx, onPass)

	log.Info("stopping NGINX")
	return proc.Stop(nginx.DefaultStopTimeout)
}

// serve runs a listener for the controller's lifetime; a listener that
// fails is logged, it does not stop the controller.
func serve(ctx context.Context, log *slog.Logger, what, addr string, run func(context.Context, string) error) {
	if addr == "" {
		return
	}
	go func() {
		if err := run(ctx, addr); err != nil {
			log.Error(what+" stopped", "address", addr, "error", err)
		}
	}()
}

// clientFor connects to the cluster, or builds the local one.
func clientFor(ctx context.Context, cfg Config, log *slog.Logger) (kubernetes.Interface, error) {
	switch {
	case cfg.Client != nil:
		return cfg.Client, nil
	case cfg.Manifests != "":
		cluster, warnings, err := local.NewCluster(cfg.Manifests)
		if err != nil {
			return nil, err
		}
		for _, w := range warnings {
			log.Warn("manifests", "warning", w)
		}
		go cluster.Watch(ctx, local.DefaultInterval, func(err error) {
			log.Warn("manifests", "error", err)
		})
		log.Info("local mode", "manifests", cfg.Manifests)
		return cluster.Client(), nil
	}
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig != "" {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	} else {
		rc, err = rest.InClusterConfig()
		if err != nil {
			err = fmt.Errorf("%w (outside a cluster, pass --kubeconfig, or --manifests for local mode)", err)
		}
	}
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "zonal"
	return kubernetes.NewForConfig(rc)
}

// nginxConfig renders nginx.conf with the certificate files it names, and
// applies it, then removes the certificate files no longer named.
type nginxConfig struct {
	settings nginx.Settings
	proc     *nginx.Process
	certs    map[types.NamespacedName]string // of the last rendering
}

func (c *nginxConfig) render(m *model.Model) ([]byte, error) {
	certs, err := nginx.WriteCerts(c.settings.RuntimeDir, m)
	if err != nil {
		return nil, err
	}
	c.certs = certs
	return nginx.Render(m, c.settings)
}

// Apply runs right after render in the same pass, so c.certs are the files
// of conf.
func (c *nginxConfig) Apply(conf []byte) error {
	if err := c.proc.Apply(conf); err != nil {
		return err
	}
	return nginx.PruneCerts(c.settings.RuntimeDir, c.certs)
}

// eventSink turns model problems into Kubernetes Events on the objects.
type eventSink struct {
	broadcaster record.EventBroadcaster
	recorder    record.EventRecorder
}

func newEventSink(client kubernetes.Interface, log *slog.Logger) *eventSink {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typed_core_v1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &eventSink{
		broadcaster: b,
		recorder:    b.NewRecorder(scheme.Scheme, core_v1.EventSource{Component: "zonal"}),
	}
}

func (e *eventSink) problem(p model.Problem) {
	ref := &core_v1.ObjectReference{Kind: p.Kind, Namespace: p.Namespace, Name: p.Name, APIVersion: apiVersion(p.Kind)}
	msg := p.Message
	if p.Field != "" {
		msg = p.Field + ": " + msg
	}
	e.recorder.Event(ref, core_v1.EventTypeWarning, "Rejected", msg)
}

func (e *eventSink) Shutdown() { e.broadcaster.Shutdown() }

func apiVersion(kind string) string {
	switch kind {
	case "Ingress", "IngressClass":
		return "networking.k8s.io/v1"
	}
	return "v1"
}

// logWriter turns NGINX's error log lines into log records.
type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(b []byte) (int, error) {
	w.log.Info(string(trimNewline(b)))
	return len(b), nil
}

func trimNewline(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// ipv6Available tells whether this host can listen on IPv6.
func ipv6Available() bool {
	l, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// nginxStatus fetches the module's counters from the status server that
// nginx.conf runs on a unix socket in the runtime directory. A fetch takes
// at most statusTimeout, less if ctx (the scrape's) ends sooner.
func nginxStatus(s nginx.Settings) metrics.StatusFunc {
	socket := s.StatusSocket()
	client := &http.Client{
		Timeout: statusTimeout,
		Transport: &http.Transport{
			DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, "unix", socket)
			},
			// A connection per fetch: a unix socket costs little to
			// open, and a reload retires the workers that hold idle ones.
			DisableKeepAlives:  true,
			DisableCompression: true,
		},
	}
	return func(ctx context.Context) ([]byte, error) {
		// The host is never resolved: every connection goes to socket.
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://nginx/zonal/status", nil)
		if err != nil {
			return nil, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return nil, fmt.Errorf("NGINX status on %s: %w", socket, err)
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxStatusSize+1))
		switch {
		case err != nil:
			return nil, fmt.Errorf("NGINX status on %s: %w", socket, err)
		case resp.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("NGINX status on %s: %s: %.200s", socket, resp.Status, body)
		case len(body) > maxStatusSize:
			return nil, fmt.Errorf("NGINX status on %s: larger than %d bytes", socket, maxStatusSize)
		}
		return body, nil
	}
}

const (
	// statusTimeout bounds one fetch of the module's counters.
	statusTimeout = time.Second
	// maxStatusSize bounds the counters' JSON: some 100 bytes per backend,
	// and the module's counters zone holds far fewer than 100,000.
	maxStatusSize = 32 << 20
)
