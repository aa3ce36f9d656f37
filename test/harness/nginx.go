package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"text/template"
	"time"

	"github.com/zonal-ingress/zonal/controller/nginx"
)

// DefaultTemplate is the nginx.conf most tests need: the zonal upstream with
// keepalive, a location that takes the backend name from the path
// (/b/<backend>/...), an access log that records $upstream_addr, and
// X-Worker naming the worker that served each response. The listener uses
// reuseport so that the kernel spreads new connections over the workers.
const DefaultTemplate = `# written by test/harness for {{.Token}}
master_process on;
worker_processes {{.Workers}};
{{- with .User}}
user {{.}};
{{- end}}
pid {{.Dir}}/nginx.pid;
error_log {{.Dir}}/error.log notice;

events {
    worker_connections 1024;
}

http {
    log_format zonal '$pid $status "$upstream_addr" "$upstream_status" $request_uri';
    access_log {{.Dir}}/access.log zonal;

    zonal_table {{.TableDir}};

    upstream zonal_balancer {
        zonal_upstream $zonal_backend{{with .UpstreamParams}} {{.}}{{end}};
{{- if gt .Keepalive 0}}
        keepalive {{.Keepalive}};
{{- end}}
    }

    server {
        listen 127.0.0.1:{{.Port}} reuseport;
        add_header X-Worker $pid always;

        location = /_harness {
            access_log off;
            return 200 "{{.Token}}";
        }

        location = /zonal/status {
            access_log off;
            zonal_status;
        }

        location ~ ^/b/(?<zonal_name>[^/]*) {
            set $zonal_backend $zonal_name;
            proxy_pass http://zonal_balancer;
            proxy_http_version 1.1;
            proxy_set_header Connection "";
            proxy_connect_timeout 5s;
            proxy_read_timeout 20s;
        }
    }
}
`

// Config says how to run one NGINX. The zero value runs DefaultTemplate
// with two workers.
type Config struct {
	// Template is nginx.conf as a text/template over ConfigData; empty
	// means DefaultTemplate.
	Template string
	// Workers is worker_processes; 0 means 2.
	Workers int
	// TableDir is the endpoint table directory; empty means "table" in the
	// NGINX directory. It need not exist when NGINX starts.
	TableDir string
	// UpstreamParams follow the variable in "zonal_upstream", e.g.
	// "max_fails=0".
	UpstreamParams string
	// Keepalive is the upstream keepalive cache size: 0 means 16, a
	// negative value leaves the directive out.
	Keepalive int
	// Vars are extra values for custom templates.
	Vars map[string]any
}

// ConfigData is what a configuration template sees.
type ConfigData struct {
	Dir            string // the NGINX prefix directory, absolute
	Port           int    // the port to listen on, on 127.0.0.1
	Token          string // identifies this instance (see /_harness)
	Workers        int
	User           string // "root" when the tests run as root, else ""
	TableDir       string
	UpstreamParams string
	Keepalive      int
	Vars           map[string]any
}

func (cfg Config) data(dir string, port int, tok string) ConfigData {
	d := ConfigData{
		Dir: dir, Port: port, Token: tok,
		Workers:        cfg.Workers,
		TableDir:       cfg.TableDir,
		UpstreamParams: cfg.UpstreamParams,
		Keepalive:      cfg.Keepalive,
		Vars:           cfg.Vars,
	}
	if d.Workers == 0 {
		d.Workers = 2
	}
	if d.TableDir == "" {
		d.TableDir = filepath.Join(dir, "table")
	}
	if d.Keepalive == 0 {
		d.Keepalive = 16
	}
	// NGINX started by root runs its workers as "nobody", who may not
	// enter a test's temporary directory.
	if os.Geteuid() == 0 {
		d.User = "root"
	}
	return d
}

// WriteConfig renders cfg into dir/nginx.conf and returns its path.
func WriteConfig(dir string, cfg Config, data ConfigData) (string, error) {
	text := cfg.Template
	if text == "" {
		text = DefaultTemplate
	}
	tmpl, err := template.New("nginx.conf").Option("missingkey=error").Parse(text)
	if err != nil {
		return "", fmt.Errorf("nginx.conf template: %w", err)
	}
	var b bytes.Buffer
	if err := tmpl.Execute(&b, data); err != nil {
		return "", fmt.Errorf("nginx.conf template: %w", err)
	}
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

var errPortTaken = errors.New("port taken by another server")

// Nginx is one running NGINX: a master process, started as a child of the
// test, and its workers.
type Nginx struct {
	tb      testing.TB
	Bin     string
	Dir     string // prefix directory: config, logs, pid file
	Conf    string
	Port    int
	Addr    string // 127.0.0.1:Port
	Workers int
	// TableDir is the endpoint table directory in the configuration.
	TableDir string
	token    string

	cmd      *exec.Cmd
	exited   chan struct{}
	stopOnce sync.Once
}

// Start runs NGINX with cfg and waits until it listens and all its workers
// are up. It stops NGINX gracefully when the test ends and then fails the
// test if the error log shows a crashed worker or an alert.
func Start(tb testing.TB, cfg Config) *Nginx {
	tb.Helper()
	bin := NginxPath(tb)
	dir := TempDir(tb)
	var lastErr error
	for attempt := 1; attempt <= 5; attempt++ {
		port, err := FreePort("127.0.0.1")
		if err != nil {
			tb.Fatal(err)
		}
		tok := token()
		data := cfg.data(dir, port, tok)
		conf, err := WriteConfig(dir, cfg, data)
		if err != nil {
			tb.Fatal(err)
		}
		n := &Nginx{
			tb: tb, Bin: bin, Dir: dir, Conf: conf, Port: port,
			Addr:    net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
			Workers: data.Workers, TableDir: data.TableDir, token: tok,
		}
		lastErr = n.start()
		if lastErr == nil {
			tb.Cleanup(n.Stop)
			return n
		}
		// Another process may have taken the port since FreePort saw it
		// free; with reuseport even another NGINX's listener can share it.
		if !errors.Is(lastErr, errPortTaken) && !strings.Contains(lastErr.Error(), "Address already in use") {
			break
		}
	}
	tb.Fatalf("starting nginx: %v", lastErr)
	return nil
}

func (n *Nginx) start() error {
	for _, f := range []string{"error.log", "access.log", "nginx.pid", "stderr.log"} {
		os.Remove(filepath.Join(n.Dir, f))
	}
	out, err := os.Create(filepath.Join(n.Dir, "stderr.log"))
	if err != nil {
		return err
	}
	defer out.Close()
	cmd := exec.Command(n.Bin, "-p", n.Dir+"/", "-c", n.Conf, "-g", "daemon off;")
	cmd.Stdout, cmd.Stderr = out, out
	// Its own process group, so that whatever is left of it can be killed
	// at once if a graceful stop fails.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", n.Bin, err)
	}
	n.cmd = cmd
	n.exited = make(chan struct{})
	go func() {
		cmd.Wait()
		close(n.exited)
	}()

	err = n.waitReady(20 * time.Second)
	if err != nil {
		n.kill()
		return fmt.Errorf("%w\n%s", err, n.startupOutput())
	}
	return nil
}

// waitReady waits until the master listens, wrote its pid file, has all
// its workers, and answers with this instance's token from every worker
// (the listener's reuseport spreads new connections over them): a forked
// worker is not ready before it has run the modules' init, and a test
// that changed the table before then would race with it.
func (n *Nginx) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	step := "listening"
	answered := map[int]bool{}
	for time.Now().Before(deadline) {
		select {
		case <-n.exited:
			return fmt.Errorf("nginx exited during start (%s)", n.cmd.ProcessState)
		default:
		}
		switch step {
		case "listening":
			c, err := net.DialTimeout("tcp", n.Addr, time.Second)
			if err == nil {
				c.Close()
				step = "pid file"
				continue
			}
		case "pid file":
			if pid, err := n.readPID(); err == nil {
				if pid != n.cmd.Process.Pid {
					return fmt.Errorf("pid file names %d, the master is %d", pid, n.cmd.Process.Pid)
				}
				step = "workers"
				continue
			}
		case "workers":
			if len(Children(n.cmd.Process.Pid)) == n.Workers {
				step = "every worker answering"
				continue
			}
		case "every worker answering":
			body, worker, err := n.fetchToken()
			if err == nil {
				if body != n.token {
					return fmt.Errorf("%s answers %q, not this instance's token %q: %w", n.Addr, body, n.token, errPortTaken)
				}
				// A worker that answered has run its module init (and
				// looked at the endpoint table). Without X-Worker (a
				// custom template) the master's answer has to do.
				if worker == 0 {
					return nil
				}
				answered[worker] = true
				if len(answered) >= n.Workers {
					return nil
				}
				continue
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("nginx not ready after %v: waiting for %s", timeout, step)
}

// fetchToken asks for /_harness on a new connection; it returns the body
// and the worker named by X-Worker (0 if none).
func (n *Nginx) fetchToken() (string, int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.Addr+"/_harness", nil)
	tr := &http.Transport{DisableKeepAlives: true}
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		return "", 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	worker, _ := strconv.Atoi(resp.Header.Get("X-Worker"))
	return string(b), worker, err
}

func (n *Nginx) startupOutput() string {
	var b strings.Builder
	for _, f := range []string{"stderr.log", "error.log"} {
		if data, err := os.ReadFile(filepath.Join(n.Dir, f)); err == nil && len(data) > 0 {
			fmt.Fprintf(&b, "--- %s:\n%s", f, data)
		}
	}
	return b.String()
}

func (n *Nginx) readPID() (int, error) {
	b, err := os.ReadFile(filepath.Join(n.Dir, "nginx.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// MasterPID is the master's process id, as its pid file says.
func (n *Nginx) MasterPID() int {
	n.tb.Helper()
	pid, err := n.readPID()
	if err != nil {
		n.tb.Fatalf("nginx pid file: %v", err)
	}
	return pid
}

// WorkerPIDs are the master's current children, sorted.
func (n *Nginx) WorkerPIDs() []int {
	return Children(n.cmd.Process.Pid)
}

// Children lists the processes whose parent is pid, sorted.
func Children(pid int) []int { return nginx.Children(pid) }

// URL is the address of path on this NGINX.
func (n *Nginx) URL(path string) string {
	return "http://" + n.Addr + path
}

// Stop asks NGINX to finish gracefully (SIGQUIT) and waits for it; after
// 15 s it kills the whole process group. Then it fails the test if the
// error log shows a worker that died on a signal, an alert or an emergency.
// Start arranges for Stop to run when the test ends; calling it earlier is
// fine.
func (n *Nginx) Stop() {
	n.stopOnce.Do(func() {
		n.tb.Helper()
		n.cmd.Process.Signal(syscall.SIGQUIT)
		select {
		case <-n.exited:
		case <-time.After(15 * time.Second):
			n.tb.Errorf("nginx (pid %d) did not stop within 15 s of SIGQUIT; killing it", n.cmd.Process.Pid)
			n.kill()
		}
		// Workers outliving the master would keep the port.
		if syscall.Kill(-n.cmd.Process.Pid, 0) == nil {
			n.tb.Errorf("nginx processes outlived the master %d; killing them", n.cmd.Process.Pid)
			syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
		}
		if bad := n.ErrorLines("exited on signal", "[alert]", "[emerg]"); len(bad) > 0 {
			n.tb.Errorf("nginx error log %s shows trouble:\n%s", filepath.Join(n.Dir, "error.log"), strings.Join(bad, "\n"))
		}
	})
}

func (n *Nginx) kill() {
	syscall.Kill(-n.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-n.exited:
	case <-time.After(10 * time.Second):
	}
}

// ErrorLogSize is the current size of the error log: an offset for
// ErrorLogSince.
func (n *Nginx) ErrorLogSize() int64 {
	st, err := os.Stat(filepath.Join(n.Dir, "error.log"))
	if err != nil {
		return 0
	}
	return st.Size()
}

// ErrorLogSince returns the error log from byte offset off on.
func (n *Nginx) ErrorLogSince(off int64) string {
	b, err := os.ReadFile(filepath.Join(n.Dir, "error.log"))
	if err != nil || off > int64(len(b)) {
		return ""
	}
	return string(b[off:])
}

// ErrorLog returns the whole error log.
func (n *Nginx) ErrorLog() string { return n.ErrorLogSince(0) }

// ErrorLines returns the error log lines containing any of substrs.
func (n *Nginx) ErrorLines(substrs ...string) []string {
	return Grep(n.ErrorLog(), substrs...)
}

// Grep returns the lines of text that contain any of substrs.
func Grep(text string, substrs ...string) []string {
	var out []string
	for line := range strings.Lines(text) {
		for _, s := range substrs {
			if strings.Contains(line, s) {
				out = append(out, strings.TrimRight(line, "\n"))
				break
			}
		}
	}
	return out
}

// AccessEntry is one access log line of DefaultTemplate's format:
// `<worker pid> <status> "<$upstream_addr>" "<$upstream_status>" <uri>`.
type AccessEntry struct {
	Raw            string
	Worker         int
	Status         int
	UpstreamAddr   string // "127.0.0.9:1234, 127.0.0.2:5678" after a retry
	UpstreamStatus string
	URI            string
}

var accessLine = regexp.MustCompile(`^(\d+) (\d+) "([^"]*)" "([^"]*)" (.*)$`)

// ParseAccess parses one line of DefaultTemplate's access log format; a
// line in another format comes back with only Raw set.
func ParseAccess(line string) AccessEntry {
	e := AccessEntry{Raw: line}
	m := accessLine.FindStringSubmatch(line)
	if m == nil {
		return e
	}
	e.Worker, _ = strconv.Atoi(m[1])
	e.Status, _ = strconv.Atoi(m[2])
	e.UpstreamAddr, e.UpstreamStatus, e.URI = m[3], m[4], m[5]
	return e
}

// AccessLog returns the access log, parsed.
func (n *Nginx) AccessLog() []AccessEntry {
	b, err := os.ReadFile(filepath.Join(n.Dir, "access.log"))
	if err != nil {
		return nil
	}
	var out []AccessEntry
	for _, line := range Grep(string(b), "") {
		out = append(out, ParseAccess(line))
	}
	return out
}

// WaitAccessLog waits until the access log has at least lines lines (NGINX
// writes a line after the response has gone out), or timeout passed, and
// returns it.
func (n *Nginx) WaitAccessLog(lines int, timeout time.Duration) []AccessEntry {
	deadline := time.Now().Add(timeout)
	for {
		got := n.AccessLog()
		if len(got) >= lines || time.Now().After(deadline) {
			return got
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// CheckConfig runs `nginx -t` on cfg (in a fresh directory) and returns its
// output; err is non-nil when NGINX rejects the configuration.
func CheckConfig(tb testing.TB, cfg Config) (string, error) {
	tb.Helper()
	bin := NginxPath(tb)
	dir := TempDir(tb)
	port, err := FreePort("127.0.0.1")
	if err != nil {
		tb.Fatal(err)
	}
	conf, err := WriteConfig(dir, cfg, cfg.data(dir, port, token()))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "-t", "-p", dir+"/", "-c", conf).CombinedOutput()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		tb.Fatalf("running %s -t: %v", bin, err)
	}
	return string(out), err
}

// TempDir makes a directory for one NGINX (with a logs/ directory inside)
// that its workers can enter even when they run as another user, and removes it when the test ends, unless
// the test failed: then it stays for a look at the logs.
func TempDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "zonal-e2e-")
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	// NGINX's compiled-in default access log is logs/access.log under the
	// prefix; a configuration that does not name one needs the directory.
	if err := os.Mkdir(filepath.Join(dir, "logs"), 0o755); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if tb.Failed() {
			tb.Logf("keeping %s for inspection", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}
