package controllerbench

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/zonal-ingress/zonal/cgo/table"
	"github.com/zonal-ingress/zonal/controller"
	"github.com/zonal-ingress/zonal/controller/loop"
	"github.com/zonal-ingress/zonal/controller/zone"
	"github.com/zonal-ingress/zonal/test/harness"
)

// inProcess is controller.Run running in this process with a real NGINX.
type inProcess struct {
	b          *testing.B
	Addr       string // NGINX's HTTP address
	RuntimeDir string
	Running    *controller.Running
	// Started is when Run was called, Ready when it called Ready.
	Started, Ready time.Time

	cancel context.CancelFunc
	done   chan error

	mu     sync.Mutex
	passes []loop.Result
}

// startController runs the controller on client (or, if nil, in local
// mode on manifests) with NGINX on free loopback ports and one worker,
// and waits until it serves.
func startController(b *testing.B, client kubernetes.Interface, manifests string) *inProcess {
	b.Helper()
	nginxBin := harness.NginxPath(b)
	dir := harness.TempDir(b)
	httpPort, err1 := harness.FreePort("127.0.0.1")
	httpsPort, err2 := harness.FreePort("127.0.0.1")
	if err1 != nil || err2 != nil {
		b.Fatal(err1, err2)
	}
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { devNull.Close() })
	logFile, err := os.Create(filepath.Join(dir, "controller.log"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { logFile.Close() })

	p := &inProcess{b: b, Addr: fmt.Sprintf("127.0.0.1:%d", httpPort), RuntimeDir: filepath.Join(dir, "runtime"), done: make(chan error, 1)}
	ready := make(chan *controller.Running, 1)
	cfg := controller.Config{
		Client:            client,
		Manifests:         manifests,
		IngressClass:      "zonal",
		ControllerClass:   "zonal.dev/ingress-controller",
		NGINXBinary:       nginxBin,
		RuntimeDir:        p.RuntimeDir,
		BindAddress:       "127.0.0.1",
		HTTPPort:          httpPort,
		HTTPSPort:         httpsPort,
		WorkerProcesses:   1,
		ReloadMinInterval: time.Second,
		Zone:              "zone-a",
		ZoneMode:          zone.ModeAuto,
		Log:               slog.New(slog.NewTextHandler(logFile, nil)),
		NGINXStdout:       devNull,
		OnPass: func(r loop.Result) {
			r.Model = nil // keep the figures, not a model per pass
			p.mu.Lock()
			p.passes = append(p.passes, r)
			p.mu.Unlock()
		},
		Ready: func(r *controller.Running) { ready <- r },
	}
	ctx, cancel := context.WithCancel(context.Background())
	p.cancel = cancel
	p.Started = time.Now()
	go func() { p.done <- controller.Run(ctx, cfg) }()
	b.Cleanup(p.stop)
	select {
	case p.Running = <-ready:
		p.Ready = time.Now()
	case err := <-p.done:
		b.Fatalf("controller.Run: %v; log %s", err, logFile.Name())
	case <-time.After(5 * time.Minute):
		b.Fatalf("controller not ready after 5 minutes; log %s", logFile.Name())
	}
	return p
}

// stop ends the controller and waits for it to stop NGINX.
func (p *inProcess) stop() {
	if p.cancel == nil {
		return
	}
	p.cancel()
	p.cancel = nil
	select {
	case err := <-p.done:
		if err != nil {
			p.b.Errorf("controller.Run: %v", err)
		}
	case <-time.After(time.Minute):
		p.b.Errorf("controller did not stop within a minute")
	}
}

// controlGenerationOffset is where the control file keeps the generation
// (zonal_control_t.generation in cgo/table/zonal_table.h).
const controlGenerationOffset = 16

// Generation reads the endpoint table's generation as NGINX's workers
// see it: from the control file.
func (p *inProcess) Generation() uint64 {
	f, err := os.Open(filepath.Join(p.RuntimeDir, "table", table.ControlFile))
	if err != nil {
		return 0
	}
	defer f.Close()
	var b [8]byte
	if _, err := f.ReadAt(b[:], controlGenerationOffset); err != nil {
		return 0
	}
	return binary.LittleEndian.Uint64(b[:])
}

// Passes returns the sync passes so far.
func (p *inProcess) Passes() []loop.Result {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.passes)
}

// prober sends requests for host probe.test on one keep-alive connection.
type prober struct {
	url string
	tr  *http.Transport
	hc  *http.Client
}

func newProber(addr string) *prober {
	tr := &http.Transport{MaxIdleConnsPerHost: 1, DisableCompression: true}
	return &prober{url: "http://" + addr + "/", tr: tr, hc: &http.Client{Transport: tr, Timeout: 10 * time.Second}}
}

// peer requests / and returns the X-Peer of the answer ("" if NGINX
// answered itself).
func (p *prober) peer() (string, error) {
	req, _ := http.NewRequest("GET", p.url, nil)
	req.Host = "probe.test"
	resp, err := p.hc.Do(req)
	if err != nil {
		return "", err
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.Header.Get("X-Peer"), nil
}

// waitPeer requests until want answers, for at most timeout, and returns
// when the answer came. With gen, it also returns when gen (the table's
// generation) first differed from its value at the start, as seen between
// requests.
func (p *prober) waitPeer(want string, timeout time.Duration, gen func() uint64) (served, published time.Time, err error) {
	deadline := time.Now().Add(timeout)
	var last string
	var gen0 uint64
	if gen != nil {
		gen0 = gen()
	}
	for {
		if gen != nil && published.IsZero() && gen() != gen0 {
			published = time.Now()
		}
		got, err := p.peer()
		now := time.Now()
		if err == nil && got == want {
			if gen != nil && published.IsZero() && gen() != gen0 {
				published = now // during the last request: at most now
			}
			return now, published, nil
		}
		if err != nil {
			last = err.Error()
		} else {
			last = "peer " + strconv.Quote(got)
		}
		if now.After(deadline) {
			return now, published, fmt.Errorf("%s did not answer within %v; last: %s", want, timeout, last)
		}
	}
}

func (p *prober) close() { p.tr.CloseIdleConnections() }

// percentiles reports p50, p90, p99 and the maximum of ds in milliseconds
// as metrics named prefix-p50-ms, ...
func percentiles(b *testing.B, prefix string, ds []time.Duration) string {
	if len(ds) == 0 {
		return prefix + ": no samples"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[min(len(s)-1, int(q*float64(len(s))))] }
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	b.ReportMetric(ms(at(0.50)), prefix+"-p50-ms")
	b.ReportMetric(ms(at(0.99)), prefix+"-p99-ms")
	b.ReportMetric(ms(s[len(s)-1]), prefix+"-max-ms")
	return fmt.Sprintf("%s over %d: min %v p50 %v p90 %v p99 %v max %v", prefix, len(s),
		s[0].Round(time.Microsecond), at(0.5).Round(time.Microsecond), at(0.9).Round(time.Microsecond),
		at(0.99).Round(time.Microsecond), s[len(s)-1].Round(time.Microsecond))
}

// tookOf returns the durations of passes, and how many reloaded.
func tookOf(passes []loop.Result) (took []time.Duration, reloads int) {
	for _, r := range passes {
		took = append(took, r.Took)
		if r.Reloaded {
			reloads++
		}
	}
	return took, reloads
}

// vmRSS is the resident set size of process pid (0: this one) in bytes,
// from /proc/<pid>/status.
func vmRSS(pid int) int64 { return procKB(pid, "status", "VmRSS:") }

// pss is the proportional set size of process pid in bytes: pages shared
// with other processes (a worker with its master) count in part.
func pss(pid int) int64 { return procKB(pid, "smaps_rollup", "Pss:") }

// procKB reads the "<field> N kB" line of /proc/<pid>/<file> in bytes.
func procKB(pid int, file, field string) int64 {
	path := "/proc/self/" + file
	if pid != 0 {
		path = "/proc/" + strconv.Itoa(pid) + "/" + file
	}
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}
