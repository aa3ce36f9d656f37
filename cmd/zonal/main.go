// Command zonal is the zonal ingress controller's command line: wiring and
// flags only; the work lives in the packages it calls.
package main

import (
	"fmt"
	"os"
	"runtime/debug"

	"github.com/alecthomas/kong"

	"github.com/zonal-ingress/zonal/controller/metrics"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

type cli struct {
	Controller controllerCmd `cmd:"" help:"Run the ingress controller: watch the cluster (or a manifests directory), publish the endpoint table and run NGINX."`
	Version    versionCmd    `cmd:"" help:"Print the version of zonal and of the Go toolchain."`
	Table      tableCmd      `cmd:"" help:"Inspect or publish an endpoint table directory."`
	Dbg        dbgCmd        `cmd:"" help:"Inspect a running controller through its debug endpoint: backends, zone decisions, the live table, nginx.conf, the model, health."`
}

type versionCmd struct{}

func (versionCmd) Run() error {
	goVersion := "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		goVersion = bi.GoVersion
	}
	fmt.Printf("zonal %s (%s)\n", version, goVersion)
	return nil
}

func main() {
	metrics.Version = version
	var c cli
	ctx := kong.Parse(&c,
		kong.Name("zonal"),
		kong.Description("zonal: a Kubernetes Ingress controller for NGINX with zone-aware load balancing."),
		kong.UsageOnError(),
	)
	if err := ctx.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "zonal: %v\n", err)
		os.Exit(1)
	}
}
