package controller

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/zonal-ingress/zonal/test/harness"
)

// TestSIGTERM stops the controller as Kubernetes does: NGINX finishes the
// request in flight, then no NGINX process is left, the controller exits
// with 0 and the ports are free.
func TestSIGTERM(t *testing.T) {
	t.Parallel()
	bs := backends(t, 171, "web")
	c := start(t, nil, manifests{
		"class.yaml":    ingressClass,
		"ingress.yaml":  webIngress(),
		"services.yaml": service("shop", "web", bs["web"]),
	})
	hc := c.Client(harness.ClientOptions{})
	expectRoute(t, hc, "http://web.test/", "web")
	st := snapshot(t, c)
	nginxPIDs := append([]int{st.master}, st.workers...)

	// A slow request in flight when SIGTERM comes.
	type result struct {
		r   harness.Reply
		err error
	}
	slow := make(chan result, 1)
	inFlight := bs["web"].Requests() + 1
	go func() {
		req, _ := http.NewRequest("GET", "http://web.test/slow", nil)
		req.Header.Set("X-Echo-Delay", "700ms")
		r, err := harness.Do(hc, req)
		slow <- result{r, err}
	}()
	if err := harness.WaitUntil(5*time.Second, 5*time.Millisecond, func() error {
		if bs["web"].Requests() < inFlight {
			return errors.New("the slow request has not reached the backend")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}

	stopped := time.Now()
	if err := c.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	state, err := c.Wait(20 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("controller exited %v after SIGTERM: %v", time.Since(stopped).Round(time.Millisecond), state)
	if !state.Exited() || state.ExitCode() != 0 {
		t.Errorf("controller ended with %v, want exit code 0; log:\n%s", state, c.LogSince(st.logOff))
	}

	select {
	case res := <-slow:
		if res.err != nil || res.r.Status != http.StatusOK || res.r.Backend() != "web" {
			t.Errorf("the request in flight at SIGTERM: %v %s, want 200 from web", res.err, describe(res.r))
		}
	case <-time.After(5 * time.Second):
		t.Error("the request in flight at SIGTERM never finished")
	}

	for _, pid := range nginxPIDs {
		if harness.Alive(pid) {
			t.Errorf("NGINX process %d still runs after the controller exited", pid)
		}
	}
	if left := harness.GroupMembers(st.master); len(left) > 0 {
		t.Errorf("NGINX's process group %d still has processes %v", st.master, left)
	}
	if _, err := os.Stat(c.PIDFile()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file %s left behind (%v)", c.PIDFile(), err)
	}
	for _, addr := range []string{c.HTTPAddr, c.HTTPSAddr} {
		if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			conn.Close()
			t.Errorf("%s still accepts connections", addr)
		}
	}
	log := c.LogSince(st.logOff)
	for _, want := range []string{"stopping NGINX", "signal 3 (SIGQUIT)", "gracefully shutting down"} {
		if len(harness.Grep(log, want)) == 0 {
			t.Errorf("no %q in the log of the shutdown:\n%s", want, log)
		}
	}
	if bad := harness.Grep(log, "level=ERROR", "[alert]", "[emerg]", "exited on signal"); len(bad) > 0 {
		t.Errorf("the shutdown logged trouble:\n%s", bad)
	}
}

// TestNGINXMasterRestarted kills the NGINX master: the controller starts a
// new one, which serves the same configuration and follows endpoint
// changes as before.
func TestNGINXMasterRestarted(t *testing.T) {
	t.Parallel()
	bs := backends(t, 181, "web", "moved")
	c := start(t, nil, manifests{
		"class.yaml":    ingressClass,
		"ingress.yaml":  webIngress(),
		"services.yaml": service("shop", "web", bs["web"]),
	})
	hc := c.Client(harness.ClientOptions{})
	expectRoute(t, hc, "http://web.test/", "web")
	// NGINX may serve before the controller has seen its workers; a master
	// that dies before then is a failed start, which ends the controller.
	if c.WaitLog(0, 10*time.Second, "NGINX started") == "" {
		t.Fatal("the controller never logged that NGINX started")
	}
	st := snapshot(t, c)

	if err := syscall.Kill(st.master, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	var master int
	// Generous: on a loaded machine the killed master's workers may hold
	// the ports for a while, and the new master retries its bind.
	err := harness.WaitUntil(30*time.Second, 20*time.Millisecond, func() error {
		master = c.MasterPID()
		if master == st.master || master == 0 {
			return errors.New("no new master yet")
		}
		if n := len(harness.Children(master)); n != c.Workers {
			return errors.New("new master without all its workers")
		}
		r, err := harness.Get(hc, "http://web.test/")
		if err != nil {
			return err
		}
		if r.Backend() != "web" {
			return errors.New(describe(r))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("NGINX not serving again within 30 s of killing its master: %v; log:\n%s", err, c.LogSince(st.logOff))
	}
	t.Logf("new master %d serving %v after the old one was killed", master, time.Since(killed).Round(time.Millisecond))
	if line := c.WaitLog(st.logOff, time.Second, "NGINX master exited"); line == "" {
		t.Errorf("the controller did not log the master's death")
	}
	// Its workers were told to finish (they hold no requests).
	if err := harness.WaitUntil(5*time.Second, 20*time.Millisecond, func() error {
		if left := harness.GroupMembers(st.master); len(left) > 0 {
			return fmt.Errorf("workers %v of the killed master still run", left)
		}
		return nil
	}); err != nil {
		t.Error(err)
	}

	// The new master's workers follow the endpoint table.
	c.WriteManifest("services.yaml", service("shop", "web", bs["moved"]))
	waitBackend(t, hc, "http://web.test/", "moved", changeTimeout)
	if m := c.MasterPID(); m != master {
		t.Errorf("master changed again, from %d to %d", master, m)
	}
}
