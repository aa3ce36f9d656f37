package nginx

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Defaults of Process's timeouts.
const (
	DefaultReloadTimeout = 10 * time.Second
	// DefaultStartTimeout covers NGINX's own retries of a busy port
	// (five tries, half a second apart).
	DefaultStartTimeout = 10 * time.Second
	// DefaultStopTimeout is how long Start's context gives NGINX to stop
	// gracefully once it is done.
	DefaultStopTimeout = 30 * time.Second
)

const (
	testTimeout = 30 * time.Second
	// After the SIGTERM that follows a failed graceful stop.
	killAfter = 5 * time.Second
	// Restart backoff: doubled after each failure, back to the minimum
	// once a master has run for stableAfter.
	restartMin  = 100 * time.Millisecond
	restartMax  = 10 * time.Second
	stableAfter = 30 * time.Second
	// How long the workers of a master that died may finish their
	// requests before they are killed.
	orphanGrace = 30 * time.Second
	// After an error line during a reload, how long to wait for more
	// (NGINX retries a busy port every half second) or for new workers.
	reloadSettle = time.Second
	// How long a confirmed reload waits for the old workers to go, so
	// that the new configuration alone answers once Apply returns.
	retireWait   = 2 * time.Second
	pollInterval = 10 * time.Millisecond
)

// Process runs NGINX as the controller's child: the master process with
// its workers, on the configuration RuntimeDir/nginx.conf. It restarts a
// master that dies, applies a new configuration only after "nginx -t"
// accepted it, and confirms every reload.
//
// Set the exported fields, then call Apply (at least once before Start,
// to install nginx.conf) and Start. The methods are safe for concurrent
// use; Apply, Reload and Stop run one at a time. A Process runs once:
// after Stop it cannot be started again.
type Process struct {
	// Binary is the NGINX executable (see FindBinary).
	Binary string
	// RuntimeDir is the absolute directory of Settings.RuntimeDir: NGINX's
	// prefix, where nginx.conf is.
	RuntimeDir string
	// Stdout receives NGINX's standard output, where the access log goes.
	// An *os.File that is not a socket is handed to NGINX as it is, so
	// that access logging does not pass through the controller; nil
	// discards it.
	Stdout io.Writer
	// Stderr receives NGINX's error log, one line per Write. It must not
	// block for long: NGINX waits when its standard error is full. Nil
	// discards the lines (Process still reads them).
	Stderr io.Writer
	// OnExit, if set, is called each time the master exits or fails to
	// start while it should be running, before the next try. It runs on
	// the supervising goroutine and must not call Stop.
	OnExit func(err error)
	// ReloadTimeout bounds Reload's wait for new workers; 0 means
	// DefaultReloadTimeout.
	ReloadTimeout time.Duration
	// StartTimeout bounds the wait for a starting master's workers; 0
	// means DefaultStartTimeout.
	StartTimeout time.Duration

	op sync.Mutex // one of Start, Apply, Reload, Stop at a time

	mu       sync.Mutex // guards state and cur
	state    processState
	cur      *master
	stopping chan struct{} // closed by Stop

	out        *outputs
	supervisor sync.WaitGroup
	reloads    atomic.Uint64
	restarts   atomic.Uint64
	// retired are the workers the last reload told to quit (guarded by op).
	retired map[int]bool
}

type processState int

const (
	idle processState = iota
	running
	stopped
)

// master is one NGINX master process.
type master struct {
	cmd     *exec.Cmd
	pid     int
	started time.Time
	ready   chan struct{} // closed once its workers run
	done    chan struct{} // closed when it has exited
	err     error         // how it exited, once done is closed
}

func (m *master) exited() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// ErrNotRunning is returned by Reload when no NGINX master is running.
var ErrNotRunning = errors.New("nginx is not running")

func (p *Process) confFile() string { return filepath.Join(p.RuntimeDir, confName) }

func (p *Process) check() error {
	if p.Binary == "" {
		return errors.New("nginx: no binary")
	}
	if !filepath.IsAbs(p.RuntimeDir) {
		return fmt.Errorf("nginx: runtime directory %q is not absolute", p.RuntimeDir)
	}
	return os.MkdirAll(p.RuntimeDir, 0o755)
}

// Start runs `<Binary> -p RuntimeDir -c RuntimeDir/nginx.conf -g 'daemon
// off;'` and returns once the master has started its workers (it has
// bound its ports then), or with an error that quotes NGINX's output.
// From then on a master that exits unexpectedly is restarted, with a
// backoff, and reported to OnExit. When ctx is done NGINX is stopped
// gracefully, as by Stop(DefaultStopTimeout).
func (p *Process) Start(ctx context.Context) error {
	p.op.Lock()
	defer p.op.Unlock()
	p.mu.Lock()
	state := p.state
	p.mu.Unlock()
	if state != idle {
		return errors.New("nginx: this Process was started before")
	}
	if err := p.check(); err != nil {
		return err
	}
	if _, err := os.Stat(p.confFile()); err != nil {
		return fmt.Errorf("nginx: no configuration to start with (Apply one first): %w", err)
	}
	out, err := newOutputs(p.Stdout, p.Stderr)
	if err != nil {
		return fmt.Errorf("nginx: %w", err)
	}
	p.out = out
	p.stopping = make(chan struct{})

	m, err := p.spawn()
	if err == nil {
		err = p.waitReady(ctx, m)
	}
	if err != nil {
		out.close()
		return err
	}
	p.mu.Lock()
	p.cur = m
	p.state = running
	p.mu.Unlock()

	p.supervisor.Add(1)
	go p.supervise(m)
	go func() {
		select {
		case <-ctx.Done():
			p.Stop(DefaultStopTimeout)
		case <-p.stopping:
		}
	}()
	return nil
}

// spawn starts a master. Stop can stop it from the moment it is p.cur.
func (p *Process) spawn() (*master, error) {
	removeStaleSocket(filepath.Join(p.RuntimeDir, statusSockName))
	cmd := exec.Command(p.Binary, "-p", p.RuntimeDir+"/", "-c", p.confFile(), "-g", "daemon off;")
	cmd.Dir = p.RuntimeDir
	if p.out.stdout != nil { // else /dev/null; never a nil *os.File
		cmd.Stdout = p.out.stdout
	}
	cmd.Stderr = p.out.stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group, so that the workers of a master that
		// died can be found and stopped.
		Setpgid: true,
		// A controller that dies without Stop leaves no NGINX holding
		// the ports. (Linux sends it when the forking thread exits; Go
		// ends threads only when a goroutine exits while locked to one,
		// which this package never does.)
		Pdeathsig: syscall.SIGQUIT,
	}
	p.out.mark()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("nginx: starting %s: %w", p.Binary, err)
	}
	m := &master{
		cmd:     cmd,
		pid:     cmd.Process.Pid,
		started: time.Now(),
		ready:   make(chan struct{}),
		done:    make(chan struct{}),
	}
	go func() {
		// Wait returns when the master exits: its output goes to files,
		// not to pipes that exec would drain first.
		m.err = cmd.Wait()
		close(m.done)
	}()
	return m, nil
}

// waitReady waits until m has workers, which it starts only after it has
// loaded the configuration and bound the ports.
func (p *Process) waitReady(ctx context.Context, m *master) error {
	timeout := p.StartTimeout
	if timeout <= 0 {
		timeout = DefaultStartTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if len(Children(m.pid)) > 0 {
			close(m.ready)
			return nil
		}
		select {
		case <-m.done:
			syscall.Kill(-m.pid, syscall.SIGKILL) // workers it may have left
			return fmt.Errorf("nginx exited at start (%v)%s", m.err, p.out.sinceMark())
		case <-deadline.C:
			killGroup(m)
			return fmt.Errorf("nginx started no workers within %v%s", timeout, p.out.sinceMark())
		case <-ctx.Done():
			killGroup(m)
			return fmt.Errorf("nginx start: %w", ctx.Err())
		case <-tick.C:
		}
	}
}

// removeStaleSocket removes the unix socket a master that was killed left
// behind: NGINX does not remove a socket file before it binds, so the next
// master would fail with "Address already in use" (a master that stops
// removes its own). It is called only when no master of this Process runs.
func removeStaleSocket(path string) {
	if st, err := os.Lstat(path); err == nil && st.Mode()&fs.ModeSocket != 0 {
		os.Remove(path)
	}
}

func killGroup(m *master) {
	syscall.Kill(-m.pid, syscall.SIGKILL)
	<-m.done
}

// supervise restarts the master whenever it exits before Stop.
func (p *Process) supervise(m *master) {
	defer p.supervisor.Done()
	backoff := restartMin
	for {
		select {
		case <-m.done:
		case <-p.stopping:
			return
		}
		if p.isStopping() {
			return
		}
		// Its workers live on, still listening: make them close their
		// sockets and finish, so that the next master can bind.
		go p.quitOrphans(m.pid)
		if time.Since(m.started) >= stableAfter {
			backoff = restartMin
		}
		p.report(fmt.Errorf("nginx master %d exited unexpectedly (%v)%s", m.pid, m.err, p.out.recentErrors()))

		for {
			select {
			case <-time.After(backoff):
			case <-p.stopping:
				return
			}
			backoff = min(2*backoff, restartMax)
			next, err := p.respawn()
			if next == nil && err == nil {
				return // stopping
			}
			if err == nil {
				if err = p.waitReady(context.Background(), next); err == nil {
					p.restarts.Add(1)
					m = next
					break
				}
			}
			if p.isStopping() {
				return
			}
			p.report(err)
		}
	}
}

// respawn starts a new master as p.cur unless Stop has begun (then it
// returns nil, nil).
func (p *Process) respawn() (*master, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != running {
		return nil, nil
	}
	m, err := p.spawn()
	if err != nil {
		return nil, err
	}
	p.cur = m
	return m, nil
}

func (p *Process) report(err error) {
	if p.OnExit != nil {
		p.OnExit(err)
	}
}

func (p *Process) isStopping() bool {
	select {
	case <-p.stopping:
		return true
	default:
		return false
	}
}

// quitOrphans stops the workers left behind by a master that died: SIGQUIT
// makes them close their listening sockets at once and finish their
// requests; after orphanGrace, or at Stop, they are killed. Those that
// became this process's children (when the controller is the container's
// init) are reaped.
func (p *Process) quitOrphans(pgid int) {
	if syscall.Kill(-pgid, syscall.SIGQUIT) != nil {
		return // none left
	}
	deadline := time.NewTimer(orphanGrace)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for {
			pid, _ := syscall.Wait4(-pgid, nil, syscall.WNOHANG, nil)
			if pid <= 0 {
				break
			}
		}
		if syscall.Kill(-pgid, 0) != nil {
			return
		}
		select {
		case <-tick.C:
			continue
		case <-deadline.C:
		case <-p.stopping:
		}
		syscall.Kill(-pgid, syscall.SIGKILL)
		time.Sleep(100 * time.Millisecond)
		syscall.Wait4(-pgid, nil, syscall.WNOHANG, nil)
		return
	}
}

// MasterPID is the process id of the current master once it has started
// its workers; 0 when none runs (before Start, after Stop, while a master
// that died is being replaced).
func (p *Process) MasterPID() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state != running || p.cur == nil || p.cur.exited() {
		return 0
	}
	select {
	case <-p.cur.ready:
		return p.cur.pid
	default:
		return 0
	}
}

// Reloads counts the reloads that NGINX confirmed.
func (p *Process) Reloads() uint64 { return p.reloads.Load() }

// Restarts counts the masters that took over, running, after one had
// exited unexpectedly.
func (p *Process) Restarts() uint64 { return p.restarts.Load() }

// Apply makes conf NGINX's configuration: it tests conf with Test, installs
// it as nginx.conf (atomically; the previous one is kept as
// nginx.conf.prev) and reloads NGINX, waiting for the reload to be
// confirmed. A configuration that fails the test, or that NGINX refuses on
// reload, leaves the running configuration and nginx.conf as they were,
// and the error says why (a *ConfigError for a failed test). The same
// configuration as nginx.conf is not reloaded again. Before Start (or
// after Stop), Apply only tests and installs.
func (p *Process) Apply(conf []byte) error {
	p.op.Lock()
	defer p.op.Unlock()
	if err := p.Test(conf); err != nil {
		return err
	}
	path := p.confFile()
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("nginx: %w", err)
	}
	hadOld := err == nil
	if hadOld && bytes.Equal(old, conf) {
		return nil
	}
	if hadOld {
		if err := writeFileAtomic(path+".prev", old, 0o644); err != nil {
			return fmt.Errorf("nginx: keeping the previous configuration: %w", err)
		}
	}
	if err := writeFileAtomic(path, conf, 0o644); err != nil {
		return fmt.Errorf("nginx: installing the configuration: %w", err)
	}
	p.mu.Lock()
	state := p.state
	p.mu.Unlock()
	if state != running {
		return nil
	}
	if err := p.reload(); err != nil {
		// A restarted master must run what runs now.
		if hadOld {
			if rerr := writeFileAtomic(path, old, 0o644); rerr != nil {
				err = errors.Join(err, fmt.Errorf("restoring the previous nginx.conf: %w", rerr))
			}
		}
		return err
	}
	return nil
}

// Reload makes the master load nginx.conf again (SIGHUP) and waits until
// it has started new workers, or it logged an error (then it keeps the old
// configuration and workers), or ReloadTimeout passed.
func (p *Process) Reload() error {
	p.op.Lock()
	defer p.op.Unlock()
	return p.reload()
}

func (p *Process) reload() error {
	timeout := p.ReloadTimeout
	if timeout <= 0 {
		timeout = DefaultReloadTimeout
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()

	// A master being restarted is waited for.
	var m *master
	for m == nil {
		p.mu.Lock()
		state, cur := p.state, p.cur
		p.mu.Unlock()
		if state != running {
			return ErrNotRunning
		}
		select {
		case <-cur.ready:
			if !cur.exited() {
				m = cur
				continue
			}
		default:
		}
		select {
		case <-tick.C:
		case <-deadline.C:
			return fmt.Errorf("nginx reload: %w (being restarted) for %v", ErrNotRunning, timeout)
		}
	}

	// The workers serving now; those told to quit by an earlier reload
	// (still finishing long requests) accept nothing and are not waited for.
	before := map[int]bool{}
	serving := map[int]bool{}
	for _, pid := range Children(m.pid) {
		before[pid] = true
		if !p.retired[pid] {
			serving[pid] = true
		}
	}
	errs := p.out.watch()
	defer p.out.unwatch(errs)
	if err := m.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		return fmt.Errorf("nginx reload: signalling master %d: %w", m.pid, err)
	}

	var logged []string // without repetitions (NGINX retries a bind)
	var settle <-chan time.Time
	for {
		for _, pid := range Children(m.pid) {
			if !before[pid] {
				p.reloads.Add(1)
				waitRetired(m.pid, serving)
				p.retired = before
				return nil
			}
		}
		select {
		case l := <-errs:
			if !slices.Contains(logged, l) {
				logged = append(logged, l)
			}
			settle = time.After(reloadSettle)
		case <-settle:
			return fmt.Errorf("nginx refused the new configuration and keeps the old one: %s", strings.Join(logged, "; "))
		case <-m.done:
			return fmt.Errorf("nginx master %d exited during a reload (%v)", m.pid, m.err)
		case <-deadline.C:
			msg := fmt.Sprintf("nginx reload: no new workers within %v", timeout)
			if len(logged) > 0 {
				msg += ": " + strings.Join(logged, "; ")
			}
			return errors.New(msg)
		case <-tick.C:
		}
	}
}

// waitRetired waits, at most retireWait, until the workers in old are no
// longer children of the master. The master starts the new workers first
// and tells the old ones to quit only about 100 ms later; until then both
// configurations answer requests. Workers that still finish long requests
// after retireWait no longer accept new ones by then.
func waitRetired(master int, old map[int]bool) {
	deadline := time.Now().Add(retireWait)
	for time.Now().Before(deadline) {
		if !slices.ContainsFunc(Children(master), func(pid int) bool { return old[pid] }) {
			return
		}
		time.Sleep(pollInterval)
	}
}

// Stop stops NGINX: gracefully first (SIGQUIT: the workers finish the
// requests in flight), then after timeout fast (SIGTERM), and 5 s later by
// SIGKILL to every process of the master's group. It returns an error if
// the graceful stop did not finish in time. Stopping twice is harmless.
func (p *Process) Stop(timeout time.Duration) error {
	p.op.Lock()
	defer p.op.Unlock()
	p.mu.Lock()
	if p.state != running {
		p.state = stopped
		p.mu.Unlock()
		return nil
	}
	p.state = stopped
	close(p.stopping)
	m := p.cur
	p.mu.Unlock()

	err := stopMaster(m, timeout)
	p.supervisor.Wait()
	p.out.close()
	return err
}

func stopMaster(m *master, timeout time.Duration) error {
	if m.exited() {
		return nil
	}
	m.cmd.Process.Signal(syscall.SIGQUIT)
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-m.done:
		return nil
	case <-t.C:
	}
	syscall.Kill(-m.pid, syscall.SIGTERM)
	select {
	case <-m.done:
		return fmt.Errorf("nginx did not stop gracefully within %v; stopped it with SIGTERM", timeout)
	case <-time.After(killAfter):
	}
	killGroup(m)
	return fmt.Errorf("nginx did not stop within %v of SIGQUIT and %v of SIGTERM; killed it", timeout, killAfter)
}

// Children returns the process ids of pid's children, sorted: an NGINX
// master's workers.
func Children(pid int) []int {
	p := strconv.Itoa(pid)
	if b, err := os.ReadFile("/proc/" + p + "/task/" + p + "/children"); err == nil {
		var out []int
		for _, f := range strings.Fields(string(b)) {
			if c, err := strconv.Atoi(f); err == nil {
				out = append(out, c)
			}
		}
		slices.Sort(out)
		return out
	}
	// Without CONFIG_PROC_CHILDREN: every process's parent.
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		c, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and ')'.
		i := bytes.LastIndexByte(b, ')')
		if i < 0 {
			continue
		}
		if f := strings.Fields(string(b[i+1:])); len(f) > 1 && f[1] == p {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}
