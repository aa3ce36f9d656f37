// Package loop is the controller's sync loop: it turns "something changed"
// notifications into a new endpoint table and, only when needed, a new
// NGINX configuration.
//
// One goroutine does all the work. Notifications set a flag; a short
// hold-off lets a burst of events (a rollout touches many EndpointSlices at
// once) collapse into one pass, bounded by a maximum delay so a steady
// stream of events cannot starve the pass. Each pass builds the model from a
// store snapshot, then:
//
//   - publishes the endpoint table if it differs from the last one: the
//     NGINX module switches on its next request, no reload;
//   - renders nginx.conf and, if it differs from the running one, tests and
//     reloads it, no more often than the reload interval allows (a pass that
//     is held back by the interval schedules itself for when it may run);
//   - reports the model's problems, each once while it lasts.
//
// The table is published before the configuration is applied, so a location
// that a reload introduces finds its backend already in the table.
package loop

import (
	"bytes"
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/controller/model"
	"github.com/zonal-ingress/zonal/controller/store"
	"github.com/zonal-ingress/zonal/controller/zone"
)

// Snapshotter gives consistent views of the watched objects.
type Snapshotter interface {
	Snapshot() *store.Snapshot
}

// Publisher publishes endpoint tables (table.Publisher).
type Publisher interface {
	Publish(t *table.Table) (table.Published, error)
}

// Applier tests a configuration and makes it the running one, or returns
// why not and leaves the running one alone.
type Applier interface {
	Apply(conf []byte) error
}

// Loop is the sync loop. Fill the fields, then call Run.
type Loop struct {
	Store Snapshotter
	Model model.Options
	Zone  zone.Policy
	// NodeName is the Node this pod runs on; when Zone names no zone, the
	// Node's zone label gives it, so a label change takes effect.
	NodeName string
	// PublishService is the controller's own Service: when Zone.Replicas
	// is nil, its ready endpoints per zone count the replicas.
	PublishService types.NamespacedName
	Tables         Publisher
	NGINX          Applier
	Render         func(*model.Model) ([]byte, error)
	Problem        func(p model.Problem) // called once per new problem
	Log            *slog.Logger

	// HoldOff is how long a pass waits for more events; MaxHoldOff bounds
	// the wait under a steady stream.
	HoldOff    time.Duration
	MaxHoldOff time.Duration
	// ReloadMinInterval is the least time between two reloads.
	ReloadMinInterval time.Duration

	notify chan struct{}
	// configDirty is set by a change that can alter nginx.conf; without
	// one, a pass refreshes endpoints only and renders nothing.
	configDirty atomic.Bool
	state       state
}

// state is what the loop remembers between passes.
type state struct {
	model      *model.Model
	snap       *store.Snapshot // the model's
	table      *table.Table
	conf       []byte // running configuration
	failedConf []byte // last configuration NGINX refused
	lastReload time.Time
	problems   map[model.Problem]bool
	passes     uint64
	zone       *string // own zone of the last pass; nil before the first
}

// Result describes one pass, for tests, metrics and logs.
type Result struct {
	Model *model.Model
	// Decisions are the zone decisions, in the order of Model.Backends,
	// taken with Policy (the own zone as known in this pass).
	Decisions  []zone.Decision
	Policy     zone.Policy
	Published  *table.Published // nil when the table did not change
	Reloaded   bool
	ReloadErr  error
	PublishErr error
	RenderErr  error
	// Deferred is set when a configuration change waits for the reload
	// interval; the loop runs again when it has passed.
	Deferred time.Duration
	Took     time.Duration
	// PublishTook is how long Tables.Publish took (encoding, writing,
	// renaming, the generation store), successful or not; 0 when the
	// table did not change.
	PublishTook time.Duration
}

// NotifyKind asks for a pass after a change to an object of kind (a
// store.Kind* name). EndpointSlices and Nodes decide endpoints and their
// zones only, so their changes skip rendering nginx.conf.
func (l *Loop) NotifyKind(kind string) {
	if kind != store.KindEndpointSlice && kind != store.KindNode {
		l.configDirty.Store(true)
	}
	l.Notify()
}

// Notify asks for a pass that may change anything. It never blocks.
func (l *Loop) Notify() {
	select {
	case l.notifyChan() <- struct{}{}:
	default:
	}
}

func (l *Loop) notifyChan() chan struct{} {
	if l.notify == nil {
		l.notify = make(chan struct{}, 1)
	}
	return l.notify
}

// Init runs the first pass synchronously, so that the caller can start
// NGINX with a tested configuration and a published table.
func (l *Loop) Init() Result {
	l.notifyChan()
	r := l.Pass(time.Now())
	// Installing the first configuration reloads nothing: the next change
	// need not wait for the reload interval.
	l.state.lastReload = time.Time{}
	return r
}

// Run processes notifications until ctx ends. OnPass, if set, sees every
// pass's result.
func (l *Loop) Run(ctx context.Context, onPass func(Result)) {
	notify := l.notifyChan()
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-notify:
		case <-retry:
		}
		retry = nil
		l.holdOff(ctx, notify)
		if ctx.Err() != nil {
			return
		}
		r := l.Pass(time.Now())
		if onPass != nil {
			onPass(r)
		}
		if r.Deferred > 0 {
			retry = time.After(r.Deferred)
		}
	}
}

// holdOff waits until events stop arriving for HoldOff, at most MaxHoldOff.
func (l *Loop) holdOff(ctx context.Context, notify chan struct{}) {
	if l.HoldOff <= 0 {
		return
	}
	deadline := time.NewTimer(max(l.MaxHoldOff, l.HoldOff))
	defer deadline.Stop()
	quiet := time.NewTimer(l.HoldOff)
	defer quiet.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-deadline.C:
			return
		case <-quiet.C:
			return
		case <-notify:
			quiet.Reset(l.HoldOff)
		}
	}
}

// Pass builds the model and brings the table and the configuration in line
// with it.
func (l *Loop) Pass(now time.Time) Result {
	start := time.Now()
	s := &l.state
	s.passes++

	snap := l.Store.Snapshot()
	configDirty := l.configDirty.Swap(false) || s.model == nil
	var m *model.Model
	if configDirty {
		m = model.Build(snap, l.Model)
		l.report(m.Problems)
	} else {
		m = model.RefreshEndpoints(s.model, s.snap, snap)
	}
	s.model, s.snap = m, snap
	r := Result{Model: m}

	zp := l.Zone
	if zp.Zone == "" {
		zp.Zone = zone.OfNode(snap.Nodes[l.NodeName])
	}
	if zp.Replicas == nil && l.PublishService.Name != "" {
		zp.Replicas = zone.Replicas(snap, l.PublishService)
	}
	l.watchZone(zp)
	t, decisions := zone.Table(m, zp)
	r.Decisions, r.Policy = decisions, zp
	if s.table == nil || !t.Equal(s.table) {
		publishStart := time.Now()
		p, err := l.Tables.Publish(t)
		r.PublishTook = time.Since(publishStart)
		if err != nil {
			r.PublishErr = err
			l.Log.Error("publishing the endpoint table failed; NGINX keeps the previous one", "error", err)
		} else {
			s.table = t
			r.Published = &p
		}
	}

	if !configDirty {
		r.Took = time.Since(start)
		return r
	}
	conf, err := l.Render(m)
	switch {
	case err != nil:
		r.RenderErr = err
		l.Log.Error("rendering nginx.conf failed; NGINX keeps its configuration", "error", err)
	case bytes.Equal(conf, s.conf), bytes.Equal(conf, s.failedConf):
		// Nothing to do: running already, or known to fail until the
		// objects change again.
	case !s.lastReload.IsZero() && now.Sub(s.lastReload) < l.ReloadMinInterval:
		r.Deferred = l.ReloadMinInterval - now.Sub(s.lastReload)
		l.configDirty.Store(true) // render again when the interval is over
	default:
		r.ReloadErr = l.NGINX.Apply(conf)
		if r.ReloadErr != nil {
			s.failedConf = conf
			l.Log.Error("NGINX refused the new configuration; it keeps serving the previous one", "error", r.ReloadErr)
		} else {
			s.conf, s.failedConf = conf, nil
			s.lastReload = now
			r.Reloaded = true
		}
	}
	r.Took = time.Since(start)
	return r
}

// watchZone logs the own zone when it is first known and when it changes,
// and warns, once per change, when it is unknown while a mode needs it.
func (l *Loop) watchZone(p zone.Policy) {
	s := &l.state
	if s.zone != nil && *s.zone == p.Zone {
		return
	}
	s.zone = &p.Zone
	switch {
	case p.Zone != "":
		l.Log.Info("own zone", "zone", p.Zone, "mode", p.Mode)
	case p.Mode != zone.ModeOff:
		l.Log.Warn("own zone unknown: every backend routes to all its peers; give it with --zone, "+
			"or NODE_NAME naming a Node labelled "+zone.LabelZone, "mode", p.Mode, "node", l.NodeName)
	}
}

// report passes on the problems that are new since the last pass.
func (l *Loop) report(problems []model.Problem) {
	s := &l.state
	current := make(map[model.Problem]bool, len(problems))
	for _, p := range problems {
		current[p] = true
		if !s.problems[p] {
			l.Log.Warn("left out of the configuration", "kind", p.Kind, "namespace", p.Namespace,
				"name", p.Name, "field", p.Field, "reason", p.Message)
			if l.Problem != nil {
				l.Problem(p)
			}
		}
	}
	s.problems = current
}
