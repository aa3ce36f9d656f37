package nginx

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
)

// Test runs `nginx -t` on conf, written to a temporary file in RuntimeDir
// (so that relative names resolve as they would in nginx.conf). A rejected
// configuration gives a *ConfigError.
func (p *Process) Test(conf []byte) error {
	if err := p.check(); err != nil {
		return err
	}
	f, err := os.CreateTemp(p.RuntimeDir, ".nginx.conf.test-*")
	if err != nil {
		return fmt.Errorf("nginx -t: %w", err)
	}
	name := f.Name()
	defer os.Remove(name)
	_, err = f.Write(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("nginx -t: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, p.Binary, "-t", "-q", "-p", p.RuntimeDir+"/", "-c", name)
	cmd.Dir = p.RuntimeDir
	out, err := cmd.CombinedOutput()
	if err == nil {
		return nil
	}
	var exit *exec.ExitError
	if !errors.As(err, &exit) || ctx.Err() != nil {
		return fmt.Errorf("running %s -t: %w", p.Binary, errors.Join(err, ctx.Err()))
	}
	return newConfigError(out, name, conf)
}

// ConfigError is a configuration that "nginx -t" rejected.
type ConfigError struct {
	// Message is what NGINX said, with the temporary file's name replaced
	// by "nginx.conf", e.g.
	// `[emerg] unknown directive "foo" in nginx.conf:12`.
	Message string
	// Line is the line of the configuration the message points at, 0 if
	// none, and Text that line.
	Line int
	Text string
}

func (e *ConfigError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("nginx -t: %s: %q", e.Message, strings.TrimSpace(e.Text))
	}
	return "nginx -t: " + e.Message
}

var (
	lineRef = regexp.MustCompile(` in nginx\.conf:(\d+)$`)
	// An error log line: "2006/01/02 15:04:05 [emerg] 123#123: text", or
	// before the error log is set up "nginx: [emerg] text".
	logPrefix = regexp.MustCompile(`^(?:nginx: |\d{4}/\d\d/\d\d \d\d:\d\d:\d\d )(\[[a-z]+\] )(?:\d+#\d+: )?`)
)

func newConfigError(out []byte, file string, conf []byte) *ConfigError {
	e := &ConfigError{}
	var msgs []string
	for l := range strings.Lines(string(out)) {
		l = logPrefix.ReplaceAllString(strings.TrimSpace(l), "$1")
		if l == "" || strings.HasPrefix(l, "nginx: configuration file ") {
			continue // "... test failed"
		}
		l = strings.ReplaceAll(l, file, confName)
		if m := lineRef.FindStringSubmatch(l); m != nil && e.Line == 0 {
			e.Line, _ = strconv.Atoi(m[1])
		}
		msgs = append(msgs, l)
	}
	e.Message = strings.Join(msgs, "; ")
	if e.Message == "" {
		e.Message = "rejected the configuration without a message"
	}
	if e.Line > 0 {
		lines := strings.Split(string(conf), "\n")
		if e.Line <= len(lines) {
			e.Text = lines[e.Line-1]
		}
	}
	return e
}
