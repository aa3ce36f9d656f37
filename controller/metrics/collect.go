package metrics

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/zonal-ingress/zonal/controller/zone"
)

// unknownZone stands for a zone that is not known, in the zone labels.
const unknownZone = "unknown"

// Series of the current state, read at scrape time (stateCollector).
var (
	backendsDesc = prometheus.NewDesc("zonal_backends",
		"Backends (Service ports that Ingresses name) in the model.", nil, nil)
	peersDesc = prometheus.NewDesc("zonal_peers",
		"Peers in the endpoint table, summed over backends, by the peer's zone (\"unknown\" when it has none) and whether the backend prefers it (zone-local or hinted for the own zone).",
		[]string{"zone", "preferred"}, nil)
	backendPeersDesc = prometheus.NewDesc("zonal_backend_peers",
		"Peers of a backend in the endpoint table.", []string{"backend"}, nil)
	localShareDesc = prometheus.NewDesc("zonal_backend_local_share",
		"Share of a backend's requests that go to its preferred peers, 0 to 1; 0 when it prefers none and routes to all peers.",
		[]string{"backend"}, nil)
	zoneModeDesc = prometheus.NewDesc("zonal_backend_zone_mode",
		"Always 1; mode is the zone mode in effect for the backend (off, local, hints or balanced; auto resolved).",
		[]string{"backend", "mode"}, nil)
	fallbackDesc = prometheus.NewDesc("zonal_backend_zone_fallback",
		"1 for a backend whose zone mode prefers peers but that routes to all peers instead; reason says why.",
		[]string{"backend", "reason"}, nil)
	zoneInfoDesc = prometheus.NewDesc("zonal_zone_info",
		"Always 1; zone is the controller's own zone (\"unknown\" when it is not known).", []string{"zone"}, nil)
	zoneKnownDesc = prometheus.NewDesc("zonal_own_zone_known",
		"1 when the controller knows its own zone, 0 when it does not (then every backend routes to all its peers).", nil, nil)
	restartsDesc = prometheus.NewDesc("zonal_nginx_restarts_total",
		"NGINX masters started again after one exited unexpectedly.", nil, nil)
	configHashDesc = prometheus.NewDesc("zonal_config_hash",
		"Hash of the nginx.conf NGINX runs (FNV-1a, 52 bits, so that a float64 holds it exactly): replicas with equal values run the same configuration.",
		nil, nil)
)

// stateCollector exports the current state: the model and zone decisions
// of the last pass, and what live.State knows of NGINX.
type stateCollector struct{ m *Metrics }

func (c stateCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{backendsDesc, peersDesc, backendPeersDesc, localShareDesc,
		zoneModeDesc, fallbackDesc, zoneInfoDesc, zoneKnownDesc, restartsDesc, configHashDesc} {
		ch <- d
	}
}

func (c stateCollector) Collect(ch chan<- prometheus.Metric) {
	c.collectPass(ch)
	if c.m.state == nil {
		return
	}
	s := c.m.state.Get()
	if s.NGINX != nil {
		ch <- prometheus.MustNewConstMetric(restartsDesc, prometheus.CounterValue, float64(s.NGINX.Restarts()))
	}
	if s.ConfFile != "" {
		if h, err := c.m.hash.of(s.ConfFile); err == nil {
			ch <- prometheus.MustNewConstMetric(configHashDesc, prometheus.GaugeValue, float64(h))
		}
	}
}

func (c stateCollector) collectPass(ch chan<- prometheus.Metric) {
	r := c.m.lastPass()
	if r == nil {
		return
	}
	own := r.Policy.Zone
	known := 1.0
	if own == "" {
		own, known = unknownZone, 0
	}
	ch <- prometheus.MustNewConstMetric(zoneInfoDesc, prometheus.GaugeValue, 1, own)
	ch <- prometheus.MustNewConstMetric(zoneKnownDesc, prometheus.GaugeValue, known)
	if r.Model == nil {
		return
	}
	backends := r.Model.Backends
	ch <- prometheus.MustNewConstMetric(backendsDesc, prometheus.GaugeValue, float64(len(backends)))

	type zoneKey struct {
		zone      string
		preferred bool
	}
	peers := map[zoneKey]int{}
	for i := range backends {
		b := &backends[i]
		var d zone.Decision
		if i < len(r.Decisions) {
			d = r.Decisions[i]
		}
		ch <- prometheus.MustNewConstMetric(backendPeersDesc, prometheus.GaugeValue, float64(len(b.Endpoints)), b.Name)
		ch <- prometheus.MustNewConstMetric(localShareDesc, prometheus.GaugeValue, float64(d.LocalShare)/zone.ShareOne, b.Name)
		ch <- prometheus.MustNewConstMetric(zoneModeDesc, prometheus.GaugeValue, 1, b.Name, string(d.Mode))
		if d.Fallback != "" {
			ch <- prometheus.MustNewConstMetric(fallbackDesc, prometheus.GaugeValue, 1, b.Name, d.Fallback)
		}
		for j := range b.Endpoints {
			k := zoneKey{zone: b.Endpoints[j].Zone, preferred: j < len(d.Preferred) && d.Preferred[j]}
			if k.zone == "" {
				k.zone = unknownZone
			}
			peers[k]++
		}
	}
	for k, n := range peers {
		preferred := "false"
		if k.preferred {
			preferred = "true"
		}
		ch <- prometheus.MustNewConstMetric(peersDesc, prometheus.GaugeValue, float64(n), k.zone, preferred)
	}
}

// confHash hashes nginx.conf, again only when the file changed (Process
// installs each configuration as a new file, renamed into place).
type confHash struct {
	mu   sync.Mutex
	file os.FileInfo
	hash uint64
}

// hashBits keeps the hash exactly representable in a float64.
const hashBits = 52

func (c *confHash) of(path string) (uint64, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if c.file != nil && os.SameFile(c.file, st) && c.file.ModTime().Equal(st.ModTime()) && c.file.Size() == st.Size() {
		return c.hash, nil
	}
	h := fnv.New64a()
	if _, err := io.Copy(h, f); err != nil {
		return 0, err
	}
	c.file, c.hash = st, h.Sum64()&(1<<hashBits-1)
	return c.hash, nil
}

// Series of the NGINX module, fetched at scrape time (moduleCollector).
var (
	statusUpDesc = prometheus.NewDesc("zonal_nginx_status_up",
		"1 if the NGINX module's counters could be read for this scrape, else 0 (and the zonal_upstream_* and module series are left out).",
		nil, nil)
	picksDesc = prometheus.NewDesc("zonal_upstream_picks_total",
		"Peers picked by the NGINX module, summed over workers, by backend and locality: local (a peer in the own zone) or remote (another zone, or none known). Retries count as picks. Resets when NGINX restarts, not on reloads.",
		[]string{"backend", "locality"}, nil)
	failuresDesc = prometheus.NewDesc("zonal_upstream_failures_total",
		"Attempts to a backend's peers that failed (connection errors and timeouts, per proxy_next_upstream), summed over workers.",
		[]string{"backend"}, nil)
	overflowDesc = prometheus.NewDesc("zonal_upstream_counters_overflow_total",
		"Backends the module could not count because its counters zone (zonal_counters_zone) was full.", nil, nil)
	workersDesc = prometheus.NewDesc("zonal_nginx_workers",
		"NGINX workers that report to the module, old workers still finishing requests after a reload included.", nil, nil)
	oldestGenerationDesc = prometheus.NewDesc("zonal_table_oldest_generation_in_use",
		"Lowest endpoint table generation that a live NGINX worker serves. A worker moves to the newest table on its next request, so an idle worker may lag without harm.",
		nil, nil)
	refusalsDesc = prometheus.NewDesc("zonal_table_refusals",
		"Endpoint table snapshots that the live NGINX workers refused as invalid (they kept the previous one), summed over workers.",
		nil, nil)
)

// nginxRunning tells whether NGINX runs with a first configuration.
func (m *Metrics) nginxRunning() bool {
	if m.state == nil {
		return false
	}
	n := m.state.Get().NGINX
	return n != nil && n.MasterPID() != 0
}

// moduleStatus is the JSON of the module's zonal_status location.
type moduleStatus struct {
	Workers []struct {
		PID        int64  `json:"pid"`
		Generation uint64 `json:"generation"`
		Refused    uint64 `json:"refused"`
	} `json:"workers"`
	Overflow uint64 `json:"overflow"`
	Backends []struct {
		Name     string `json:"name"`
		Local    uint64 `json:"local"`
		Remote   uint64 `json:"remote"`
		Failures uint64 `json:"failures"`
	} `json:"backends"`
}

// moduleCollector exports the module's counters, fetched with the scrape's
// context. It never fails the scrape: when NGINX does not answer, it says
// so in zonal_nginx_status_up.
type moduleCollector struct {
	ctx context.Context
	m   *Metrics
}

func (c moduleCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{statusUpDesc, picksDesc, failuresDesc, overflowDesc,
		workersDesc, oldestGenerationDesc, refusalsDesc} {
		ch <- d
	}
}

func (c moduleCollector) Collect(ch chan<- prometheus.Metric) {
	s, ok := c.fetch()
	if !ok {
		ch <- prometheus.MustNewConstMetric(statusUpDesc, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(statusUpDesc, prometheus.GaugeValue, 1)

	// Names are unique in the module's tree; summing makes a duplicate
	// harmless instead of an error for the whole family.
	type counts struct{ local, remote, failures uint64 }
	byName := make(map[string]counts, len(s.Backends))
	for _, b := range s.Backends {
		n := byName[b.Name]
		n.local += b.Local
		n.remote += b.Remote
		n.failures += b.Failures
		byName[b.Name] = n
	}
	for name, n := range byName {
		ch <- prometheus.MustNewConstMetric(picksDesc, prometheus.CounterValue, float64(n.local), name, "local")
		ch <- prometheus.MustNewConstMetric(picksDesc, prometheus.CounterValue, float64(n.remote), name, "remote")
		ch <- prometheus.MustNewConstMetric(failuresDesc, prometheus.CounterValue, float64(n.failures), name)
	}
	ch <- prometheus.MustNewConstMetric(overflowDesc, prometheus.CounterValue, float64(s.Overflow))

	ch <- prometheus.MustNewConstMetric(workersDesc, prometheus.GaugeValue, float64(len(s.Workers)))
	var oldest, refused uint64
	for _, w := range s.Workers {
		refused += w.Refused
		// 0: the worker has loaded no table yet (none was published
		// when it started); it is not serving an old one.
		if w.Generation != 0 && (oldest == 0 || w.Generation < oldest) {
			oldest = w.Generation
		}
	}
	if oldest != 0 {
		ch <- prometheus.MustNewConstMetric(oldestGenerationDesc, prometheus.GaugeValue, float64(oldest))
	}
	ch <- prometheus.MustNewConstMetric(refusalsDesc, prometheus.GaugeValue, float64(refused))
}

// fetch reads the module's counters. It logs when they become unavailable
// while NGINX runs (before it started, or while it is being restarted,
// they cannot be read) and when they are back, not at every scrape.
func (c moduleCollector) fetch() (moduleStatus, bool) {
	var s moduleStatus
	err := errors.New("no status function")
	if c.m.status != nil {
		var body []byte
		body, err = c.m.status(c.ctx)
		if err == nil {
			if err = json.Unmarshal(body, &s); err != nil {
				err = fmt.Errorf("NGINX status is not the zonal_status JSON: %w", err)
			}
		}
	}
	if err != nil {
		if c.m.nginxRunning() && !c.m.statusDown.Swap(true) {
			c.m.log().Warn("metrics: the NGINX module's counters are unavailable; zonal_nginx_status_up is 0", "error", err)
		}
		return s, false
	}
	if c.m.statusDown.Swap(false) {
		c.m.log().Info("metrics: the NGINX module's counters are available again")
	}
	return s, true
}
