package debug

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/zonal-ingress/zonal/controller/live"
)

// healthView is /healthz: the verdict with what it rests on.
type healthView struct {
	Status string `json:"status"` // ok or unhealthy
	Error  string `json:"error,omitempty"`
	// Ready and NotReady repeat /readyz, for people reading this page.
	Ready    bool   `json:"ready"`
	NotReady string `json:"notReady,omitempty"`

	Passes        uint64     `json:"passes"`
	LastPass      *time.Time `json:"lastPass,omitempty"`
	SinceLastPass string     `json:"sinceLastPass,omitempty"`
	OwnZone       string     `json:"ownZone"`
	// TableGeneration is the endpoint table generation last published.
	TableGeneration uint64    `json:"tableGeneration"`
	NGINX           nginxView `json:"nginx"`
}

type nginxView struct {
	MasterPID int    `json:"masterPID"`
	Reloads   uint64 `json:"reloads"`
	Restarts  uint64 `json:"restarts"`
}

// readyView is /readyz.
type readyView struct {
	Status string `json:"status"` // ready or not ready
	Error  string `json:"error,omitempty"`
}

// healthz answers 200 while the controller is alive, else 503 with the
// reason: see alive.
func (s *Server) healthz(ctx *fasthttp.RequestCtx, snap live.Snapshot) {
	v := healthView{
		Status: "ok", Passes: snap.Passes, OwnZone: snap.Policy.Zone, TableGeneration: snap.Published,
	}
	if !snap.LastAt.IsZero() {
		at := snap.LastAt
		v.LastPass = &at
		v.SinceLastPass = time.Since(at).Round(time.Millisecond).String()
	}
	if snap.NGINX != nil {
		v.NGINX = nginxView{MasterPID: snap.NGINX.MasterPID(), Reloads: snap.NGINX.Reloads(), Restarts: snap.NGINX.Restarts()}
	}
	if err := snap.Ready(); err != nil {
		v.NotReady = err.Error()
	} else {
		v.Ready = true
	}
	status := fasthttp.StatusOK
	if err := alive(snap); err != nil {
		v.Status, v.Error = "unhealthy", err.Error()
		status = fasthttp.StatusServiceUnavailable
	}
	writeJSON(ctx, status, v)
}

// alive says why the controller is not alive, or nil.
//
// The sync loop runs only when something changes, so the age of the last
// pass says nothing: a quiet cluster has old passes. What a liveness probe
// can check is that the controller got through its first pass and that
// the NGINX master it supervises exists (kill with signal 0). A master
// that died is restarted by the controller; until the new one is up the
// answer is 503, which a probe's failure threshold rides out. Before
// NGINX first starts the answer is 503 too: give the pod a startup probe.
func alive(snap live.Snapshot) error {
	if snap.Passes == 0 {
		return errors.New("no sync pass has run yet: the controller is starting")
	}
	if snap.NGINX == nil {
		return errors.New("NGINX has not started yet")
	}
	pid := snap.NGINX.MasterPID()
	if pid <= 0 {
		return errors.New("the NGINX master is not running: the controller is restarting it")
	}
	// EPERM means the process exists (as another user).
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("the NGINX master (pid %d) is gone", pid)
	}
	return nil
}

// readyz answers 200 when the controller serves: informers synced, NGINX
// started with a first configuration, a table published.
func (s *Server) readyz(ctx *fasthttp.RequestCtx, snap live.Snapshot) {
	if err := snap.Ready(); err != nil {
		writeJSON(ctx, fasthttp.StatusServiceUnavailable, readyView{Status: "not ready", Error: err.Error()})
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, readyView{Status: "ready"})
}
