// Package live holds what the running controller knows right now: the
// result of the last sync pass, the running NGINX, the table directory. The
// debug endpoint and the metrics read it; the sync loop writes it.
package live

import (
	"errors"
	"sync"
	"time"

	"github.com/zonal-ingress/zonal/controller/loop"
	"github.com/zonal-ingress/zonal/controller/zone"
)

// NGINX is what the controller's NGINX process tells about itself.
type NGINX interface {
	MasterPID() int
	Reloads() uint64
	Restarts() uint64
}

// State is the controller's live state. The zero value is ready to use;
// every method is safe for concurrent use.
type State struct {
	mu sync.RWMutex

	last     loop.Result
	lastAt   time.Time
	passes   uint64
	policy   zone.Policy
	nginx    NGINX
	synced   bool
	tableDir string
	confFile string
	// Published is the last table generation published, and when.
	published   uint64
	publishedAt time.Time
}

// Pass records the result of a sync pass.
func (s *State) Pass(r loop.Result) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = r
	s.lastAt = time.Now()
	s.passes++
	s.policy = r.Policy
	if r.Published != nil {
		s.published = r.Published.Generation
		s.publishedAt = s.lastAt
	}
}

// Synced records that the informers have synced.
func (s *State) Synced() {
	s.mu.Lock()
	s.synced = true
	s.mu.Unlock()
}

// Started records the running NGINX and where its files are.
func (s *State) Started(n NGINX, tableDir, confFile string) {
	s.mu.Lock()
	s.nginx, s.tableDir, s.confFile = n, tableDir, confFile
	s.mu.Unlock()
}

// Snapshot is a consistent copy of the state.
type Snapshot struct {
	Last        loop.Result
	LastAt      time.Time
	Passes      uint64
	Policy      zone.Policy
	NGINX       NGINX // nil before NGINX started
	Synced      bool
	TableDir    string
	ConfFile    string
	Published   uint64
	PublishedAt time.Time
}

// Get returns the current state.
func (s *State) Get() Snapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return Snapshot{
		Last: s.last, LastAt: s.lastAt, Passes: s.passes, Policy: s.policy,
		NGINX: s.nginx, Synced: s.synced, TableDir: s.tableDir, ConfFile: s.confFile,
		Published: s.published, PublishedAt: s.publishedAt,
	}
}

// Ready says why the controller does not serve yet, or nil: informers
// synced, first configuration loaded, table published.
func (s Snapshot) Ready() error {
	switch {
	case !s.Synced:
		return errors.New("informers have not synced")
	case s.NGINX == nil || s.NGINX.MasterPID() == 0:
		return errors.New("NGINX has not started with a first configuration")
	case s.Published == 0:
		return errors.New("no endpoint table published")
	}
	return nil
}
